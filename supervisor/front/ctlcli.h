/*
 * ctlcli.h - the operator's commands on running agent runs, clients of
 * their control sockets (supervisor/ctl/ctl.h):
 *
 *   agentz ctl RUN_OR_SOCKET COMMAND [ARGS]   one request, its reply
 *   agentz runs [--json] [DIR|SOCKET...]      every run found, one line each
 */
#ifndef AGENTZ_CTLCLI_H
#define AGENTZ_CTLCLI_H

/* argv[0] is "ctl" / "runs". Return the process exit status. */
int ctlcli_ctl_main(int argc, char **argv);
int ctlcli_runs_main(int argc, char **argv);

#endif
