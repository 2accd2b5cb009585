/*
 * ctlfind.h - the runs' control sockets found and named, for agentz ctl
 * and agentz runs (ctlcli.c): one request to a socket (a line, its
 * reply), the sockets of folders gathered once each, their status, and
 * each run's handle, the name agentz ctl takes for it.
 *
 * A run's name (ctl.h) need not be unique: two runs whose journals are
 * both journal.jsonl are both named "journal" (the second one's socket is
 * journal-PID.sock). A run's handle is its name while it is the only
 * live run of that name in the folders agentz ctl searches, else
 * NAME-PID; NAME-PID is always taken. A socket outside those folders is
 * handled by its path, a socket nobody answers by its file name.
 */
#ifndef AGENTZ_CTLFIND_H
#define AGENTZ_CTLFIND_H

#include <stddef.h>
#include <sys/types.h>

/* One socket found, and what its status said. */
struct ctl_found {
	char *path;		/* the socket as found */
	char *stem;		/* its file name without ".sock" */
	dev_t dev;		/* one socket reached by two paths: once */
	ino_t ino;
	char *status;		/* the status reply (JSON text), or NULL */
	int err;		/* no status: why (errno) */
	char *name;		/* the status's "name" (else stem) */
	long long pid;		/* the status's "pid" (0: none) */
	char *cwd, *task;	/* the status's "cwd", "task" (or NULL) */
	int searched;		/* in a folder agentz ctl NAME searches */
	int shown;		/* one agentz runs lists */
	int asked;		/* status asked */
	char *handle;		/* what agentz ctl takes (ctl_found_handles) */
};

struct ctl_founds {
	struct ctl_found *v;
	size_t n, cap;
};

/*
 * Sends line (with its newline) to the socket at path, waits up to
 * timeout_s for the reply line: malloc'ed (no newline), or NULL with
 * errno.
 */
char *ctl_ask(const char *path, const char *line, int timeout_s);

/*
 * The sockets at where: where itself when a socket, else the *.sock in
 * the folder and in its folders one level down (a unit's
 * RuntimeDirectory=agentz/NAME); only those whose file name passes keep
 * (NULL: all). One already found is not added again (its flags are
 * or'ed). -1 with errno when where is neither (ENOTDIR) or cannot be
 * read; a folder without sockets is 0.
 */
int ctl_found_scan(struct ctl_founds *fs, const char *where, int searched,
    int shown, int (*keep)(const char *stem, const void *arg),
    const void *arg);
/* The same for each folder agentz ctl NAME searches (those that exist). */
void ctl_found_search(struct ctl_founds *fs, int shown,
    int (*keep)(const char *stem, const void *arg), const void *arg);
/* Asks every socket found for its status, once, and fills the fields. */
void ctl_found_ask(struct ctl_founds *fs, int timeout_s);
/* Each socket's handle (see the top). */
void ctl_found_handles(struct ctl_founds *fs);
void ctl_found_free(struct ctl_founds *fs);

/*
 * 1 when a run whose socket is stem.sock may be the one agentz ctl names
 * name by (its name or NAME-PID): stem is name or name-DIGITS, or name is
 * B-DIGITS and stem is B or B-DIGITS.
 */
int ctl_found_family(const char *stem, const void *name);

#endif
