/*
 * confighelp.h - the --help texts of agentz and agentz exec.
 */
#ifndef AGENTZ_CONFIGHELP_H
#define AGENTZ_CONFIGHELP_H

#include <stdio.h>

/* Whether cmd (as config_parse got it) is "agentz exec". */
int config_is_exec(const char *cmd);
/* cmd's --help text onto f. */
void config_usage(const char *cmd, FILE *f);

#endif
