/*
 * agentz - the supervisor.
 *
 *   agentz [options] "task"         an agent run: the model writes the cells
 *   agentz exec [options] FILE...   a supervised persistent interpreter
 *   agentz report JOURNAL [-o FILE] a run's journal as an HTML page
 *   agentz ctl RUN COMMAND          steer a running agent run
 *   agentz runs [--json]            the agent runs on this host
 *
 * main() only does what both need first (no core dumps of our memory, the
 * subreaper, ./.env) and picks the front end; each parses its options.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "proto/proto.h"
#include "sandbox/contain.h"
#include "common/exitcodes.h"
#include "supervisor/front/agentcli.h"
#include "supervisor/front/ctlcli.h"
#include "supervisor/text/dotenv.h"
#include "supervisor/front/exec.h"
#include "supervisor/ui/notify.h"
#include "supervisor/world/view.h"
#include "supervisor/report/report.h"

static void
usage(FILE *f)
{
	(void)fprintf(f,
	    "usage: agentz [options] \"TASK\"          run an agent on a task\n"
	    "       agentz exec [options] FILE...    run Python cells in a "
	    "supervised worker\n"
	    "       agentz report JOURNAL [-o FILE]  a run's journal as one "
	    "HTML page\n"
	    "       agentz ctl RUN COMMAND [ARGS]    steer a running run "
	    "(status, note,\n"
	    "                                        stop, pause, resume, "
	    "kill-cell, budgets,\n"
	    "                                        allow, deny, network, "
	    "approve, reject)\n"
	    "       agentz runs [--json]             list the agent runs on "
	    "this host\n"
	    "       agentz --version\n"
	    "'agentz --help' and 'agentz exec --help' list the options\n");
}

/*
 * ./.env, unless the working directory is (or is inside) a run's
 * workspace where cells could have written it (OPENAI_BASE_URL to a
 * server of theirs would receive the key): refused then, and said. The
 * .env of the workspace itself that an earlier run loaded, and so kept
 * from its cells, is still loaded.
 */
static int
load_dotenv(void)
{
	char cwd[PATH_MAX], ws[PATH_MAX];
	struct stat st;
	int rc;

	if (lstat(".env", &st) < 0)
		return 0;
	if (getcwd(cwd, sizeof cwd) == NULL)
		return dotenv_load(".env");
	if (view_dotenv_check(cwd, ws, sizeof ws) < 0) {
		log_warnx("not loading %s/.env: %s is the workspace of an "
		    "agentz run, where cells could have written it (it is "
		    "not the .env an earlier run loaded there); set the "
		    "variables in the environment, or if you wrote this .env "
		    "and no cell could have, remove %s/%s", cwd, ws, ws,
		    VIEW_MARKER);
		return 0;
	}
	if ((rc = dotenv_load(".env")) >= 0)
		view_dotenv_loaded(cwd);
	return rc;
}

/* When a subcommand starts (main's order). */
enum stage {
	STAGE_CLIENT,	/* first: the operator's clients stay dumpable, so
			 * a run can check who they are */
	STAGE_FILE,	/* reads a file, runs nothing: no ./.env */
	STAGE_RUN	/* a run with a worker, after ./.env */
};

static const struct subcommand {
	const char *name;
	int (*main)(int argc, char **argv);	/* argv[0]: the name */
	enum stage stage;
} subcommands[] = {
	{ "ctl", ctlcli_ctl_main, STAGE_CLIENT },
	{ "runs", ctlcli_runs_main, STAGE_CLIENT },
	{ "report", report_main, STAGE_FILE },
	{ "exec", exec_main, STAGE_RUN },
};

/* argv[1]'s subcommand, or NULL (an agent run, or no argument). */
static const struct subcommand *
subcommand(int argc, char **argv)
{
	size_t i;

	for (i = 0; argc >= 2 && i < sizeof subcommands / sizeof
	    subcommands[0]; i++)
		if (strcmp(argv[1], subcommands[i].name) == 0)
			return &subcommands[i];
	return NULL;
}

int
main(int argc, char **argv)
{
	const struct subcommand *sub = subcommand(argc, argv);

	log_init("agentz", 0);
	if (sub != NULL && sub->stage == STAGE_CLIENT)
		return sub->main(argc - 1, argv + 1);
	/* Nothing we start may read our memory or /proc/<pid>/environ. */
	(void)prctl(PR_SET_DUMPABLE, 0);
	/* Orphans of the worker's tree come to us, to be swept. */
	(void)contain_subreaper();
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--version") == 0) {
		(void)printf("agentz 0.1 (protocol %d)\n", PROTO_VERSION);
		return EXIT_OK;
	}
	if (sub != NULL && sub->stage == STAGE_FILE)
		return sub->main(argc - 1, argv + 1);
	if (load_dotenv() < 0)
		return EXIT_USAGE;
	notify_load_credentials();
	if (sub != NULL)
		return sub->main(argc - 1, argv + 1);
	return agentcli_main(argc, argv);
}
