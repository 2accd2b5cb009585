/*
 * confignet.h - the network options (internal to front/: config.c calls
 * it once the command line is read): --network's default, the egress
 * policy's entries checked, and `--allow-host @FILE` / `--deny-host
 * @FILE` read (one entry a line, '#' comments and blank lines skipped).
 */
#ifndef AGENTZ_CONFIGNET_H
#define AGENTZ_CONFIGNET_H

#include "supervisor/front/config.h"

/* --network's values, in enum jail_network's order, NULL-ended. */
extern const char *const config_network_names[];

/* Appends s to the NULL-terminated list *v of *n entries (config.c's,
 * for the repeatable options). 0, or -1 out of memory. */
int config_list_add(const char ***v, size_t *n, const char *s);

/* 0, or -1 after printing one line naming the option, the entry (and
 * the file and line) and what is wrong. */
int config_network_check(struct config *c, const char *cmd);
/* Frees what config_network_check read. */
void config_network_clear(struct config *c);

#endif
