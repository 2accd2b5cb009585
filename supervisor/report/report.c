/*
 * report.c - `agentz report JOURNAL [-o FILE] [--max-shown SIZE]`
 * (report.h): reads the journal (report_read.c), then writes the page
 * (report_page.c) to a temporary file beside FILE, renamed over it once
 * whole, so a half-written page never stands in for a report. The page
 * is created 0600, like the journal it shows. Without -o (or with -o -)
 * the page goes to stdout.
 */
#include "supervisor/report/report.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/exitcodes.h"
#include "common/size.h"
#include "supervisor/report/report_int.h"

/* Bytes shown of one cell's code, output or traceback (head and tail). */
#define SHOWN_DEFAULT	(64 * 1024)
#define SHOWN_MIN	256

static const char help[] =
    "usage: agentz report JOURNAL [-o FILE] [--max-shown SIZE]\n"
    "  a run's journal (--journal) as one self-contained HTML page: the\n"
    "  task, a timeline of cells, memory and CPU per cell, tokens over\n"
    "  time, each cell's code, output and traceback, stops, operator notes\n"
    "  and every other record; unreadable lines are shown as such\n"
    "  -o, --output FILE   write the page to FILE (default stdout)\n"
    "  --max-shown SIZE    bytes shown of one cell's code, output or\n"
    "                      traceback, head and tail (default 64K)\n"
    "exit status: 0 written, 1 the journal cannot be read or the page\n"
    "  cannot be written, 2 usage error\n";

struct opts {
	const char *journal, *output;
	size_t shown;
};

static int
parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{"output", required_argument, NULL, 'o'},
		{"max-shown", required_argument, NULL, 'm'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t size;
	int c;

	o->shown = SHOWN_DEFAULT;
	while ((c = getopt_long(argc, argv, "o:h", longs, NULL)) != -1) {
		if (c == 'h') {
			(void)fputs(help, stdout);
			return EXIT_OK;
		} else if (c == 'o')
			o->output = optarg;
		else if (c == 'm' && size_parse(optarg, &size) == 0 &&
		    size >= SHOWN_MIN && size <= SIZE_MAX / 2)
			o->shown = (size_t)size;
		else {
			if (c == 'm')
				log_warnx("report: --max-shown '%s': a size "
				    "of at least %d bytes (e.g. 64K)", optarg,
				    SHOWN_MIN);
			(void)fputs(help, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		log_warnx("report: %s", optind >= argc ? "which journal? "
		    "(agentz report JOURNAL -o run.html)" : "one journal at "
		    "a time");
		return EXIT_USAGE;
	}
	o->journal = argv[optind];
	return -1;
}

/* A nonce for the page's one script (Content-Security-Policy). */
static int
make_nonce(char *hex, size_t size)
{
	unsigned char b[16];
	size_t i;

	if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
		return -1;
	for (i = 0; i < sizeof b && 2 * i + 2 < size; i++)
		(void)snprintf(hex + 2 * i, 3, "%02x", b[i]);
	return 0;
}

static int
write_page(struct report *r, FILE *out)
{
	char nonce[40];

	if (make_nonce(nonce, sizeof nonce) < 0) {
		log_warn("report: getrandom");
		return -1;
	}
	r->out = out;
	report_page(r, nonce);
	return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}

/* The page into a temporary file beside path, then renamed over it. */
static int
write_file(struct report *r, const char *path)
{
	char *tmp;
	FILE *out;
	int fd, rc;

	if (asprintf(&tmp, "%s.tmpXXXXXX", path) < 0)
		fatalx("report: out of memory");
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0 ||
	    (out = fdopen(fd, "w")) == NULL) {
		log_warn("report: cannot create %s", tmp);
		if (fd >= 0)
			(void)close(fd);
		free(tmp);
		return -1;
	}
	rc = write_page(r, out);
	if (rc == 0 && fsync(fd) < 0)
		rc = -1;
	if (fclose(out) != 0)
		rc = -1;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -1;
	if (rc < 0) {
		log_warn("report: cannot write %s", path);
		(void)unlink(tmp);
	}
	free(tmp);
	return rc;
}

/* -o naming the journal itself would replace the run's record. */
static int
is_journal(FILE *journal, const char *output)
{
	struct stat a, b;

	return output != NULL && stat(output, &b) == 0 &&
	    fstat(fileno(journal), &a) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino;
}

static int
render(struct report *r, const struct opts *o)
{
	int rc = report_read(r);

	if (rc == -1)
		log_warn("report: cannot read %s", o->journal);
	if (rc < 0)
		return EXIT_FAILED;
	if (o->output == NULL || strcmp(o->output, "-") == 0) {
		if (write_page(r, stdout) < 0) {
			log_warn("report: cannot write the page to stdout");
			return EXIT_FAILED;
		}
		return EXIT_OK;
	}
	return write_file(r, o->output) < 0 ? EXIT_FAILED : EXIT_OK;
}

int
report_main(int argc, char **argv)
{
	struct opts o = { NULL, NULL, 0 };
	struct report r;
	int rc;

	if ((rc = parse(argc, argv, &o)) >= 0)
		return rc;
	memset(&r, 0, sizeof r);
	r.path = o.journal;
	r.shown = o.shown;
	if ((r.f = fopen(o.journal, "re")) == NULL) {
		log_warn("report: cannot read the journal %s", o.journal);
		return EXIT_FAILED;
	}
	if (is_journal(r.f, o.output)) {
		log_warnx("report: -o %s is the journal itself: the page "
		    "would replace it", o.output);
		(void)fclose(r.f);
		return EXIT_USAGE;
	}
	rc = render(&r, &o);
	(void)fclose(r.f);
	report_clear(&r);
	return rc;
}
