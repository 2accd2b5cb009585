/*
 * dotenv.h - load ./.env: KEY=VALUE lines (optional "export ", quotes,
 * # comments) into the environment without overriding what is set.
 */
#ifndef AGENTZ_DOTENV_H
#define AGENTZ_DOTENV_H

/* The most a .env may hold, in bytes. */
#define DOTENV_MAX 65536

/* Returns variables set, 0 without a file, -1 (with a warning naming the
 * file and line) on a malformed line; earlier lines stay set. Only a
 * regular file is read: a symbolic link (never followed), a FIFO, a
 * device or a folder, a file over DOTENV_MAX bytes or one belonging to
 * neither us nor root is refused with a warning (-1), and nothing is
 * set. Whether the folder may be trusted is the caller's question. */
int dotenv_load(const char *path);

#endif
