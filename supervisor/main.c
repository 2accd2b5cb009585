/*
 * agentz - the supervisor.
 *
 *   agentz exec [options] FILE...   supervised persistent interpreter
 *   agentz [options] "task"         an agent run (the model writes cells)
 *
 * main() only picks the front end; each parses its own options.
 */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "common/log.h"
#include "supervisor/config.h"
#include "proto/proto.h"
#include "sandbox/contain.h"
#include "supervisor/exec.h"

static void
usage(FILE *f)
{
	(void)fprintf(f,
	    "usage: agentz exec [options] FILE...   run Python cells in a "
	    "supervised worker\n"
	    "       agentz --help | --version\n"
	    "see 'agentz exec --help' for the options\n");
}

int
main(int argc, char **argv)
{
	log_init("agentz", 0);
	/* Nothing we start may read our memory or /proc/<pid>/environ. */
	(void)prctl(PR_SET_DUMPABLE, 0);
	/* Orphans of the worker's tree come to us, to be swept. */
	(void)contain_subreaper();
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "exec") == 0)
		return exec_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		(void)printf("agentz 0.1 (protocol %d)\n", PROTO_VERSION);
		return EXIT_OK;
	}
	(void)fprintf(stderr, "agentz: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
