/*
 * dotenv.h - load ./.env: KEY=VALUE lines (optional "export ", quotes,
 * # comments) into the environment without overriding what is set.
 */
#ifndef AGENTZ_DOTENV_H
#define AGENTZ_DOTENV_H

/* Returns variables set, 0 without a file, -1 (with a warning naming the
 * file and line) on a malformed line; earlier lines stay set. */
int dotenv_load(const char *path);

#endif
