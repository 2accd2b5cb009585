/*
 * agentcli.h - `agentz [options] "TASK"`: an agent run (agent/agent.h)
 * from the command line, its observers the terminal's (ui/listen.h).
 */
#ifndef AGENTZ_AGENTCLI_H
#define AGENTZ_AGENTCLI_H

/* argv as main's; the process exit status (common/exitcodes.h). */
int agentcli_main(int argc, char **argv);

#endif
