/*
 * report_int.h - what the report's files share: the journal as read
 * (report_read.c), and the HTML writers (report_html.c) the page
 * (report_page.c), the cells (report_cells.c) and the chart
 * (report_chart.c) are written with.
 *
 * A journal is hostile input: any line may be torn, not JSON, of an
 * unknown type, huge, or hold markup. The first pass keeps only what the
 * timeline, the tables and the chart need (short copies, numbers, and
 * where each cell's records are); a cell's code, output and traceback are
 * read again, one line at a time, while its details are written.
 */
#ifndef AGENTZ_REPORT_INT_H
#define AGENTZ_REPORT_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "supervisor/cells/cells.h"

/* Bytes of a journal text shown in a table cell or a record's field. */
#define REPORT_SHORT	240
/* Bytes of one field of an unknown record kept after the first pass. */
#define REPORT_KEEP	4096

/* Where a record is in the journal: lineno 0 is none. */
struct rline {
	off_t off;
	size_t len;		/* the newline included */
	long lineno;
};

/* One cell, from its "input" and "output" records. */
struct rcell {
	long long n;
	struct rline in, out;
	double started, finished;	/* wall clock; 0 unknown */
	double duration;		/* seconds; -1 unknown */
	char *status, *kind, *exc, *ns, *summary;	/* or NULL */
	char *threads;		/* threads a rollback lost, "a, b", or NULL */
	long long rss_kb, mem_peak, cpu_us;	/* -1 unknown */
	long long repair_of;		/* the failed cell, or -1 */
	int killed;
	enum cell_ns fate;		/* from ns (kept when unknown) */
	enum cell_timeout stage;	/* from the record's "timeout" */
	int restarted;			/* no output: a resume followed */
};

/* A journal line that is not a cell's input or output record. */
struct rentry {
	long lineno;
	json_t *rec;		/* NULL: unreadable */
	char *why;		/* why it is unreadable */
	char *raw;		/* its first bytes as read */
	size_t rawlen;
};

/* The tokens used so far, at a time. */
struct rpoint {
	double t;
	long long tokens, est;
	double cost;		/* -1 not priced */
};

struct report {
	const char *path;
	FILE *f;		/* the journal */
	FILE *out;		/* the page */
	char *task, *model;	/* of the first "run" record, or NULL */
	double t0, t1;		/* the first and last time seen; 0 none */
	double last_t;		/* the last time seen, in journal order */
	long long pending_repair;
	long long last_in;	/* the cell of the last input record, or -1 */
	struct rcell *cells;	/* sorted by n */
	size_t ncells, capcells;
	struct rentry *ents;
	size_t nents, capents;
	struct rpoint *pts;
	size_t npts, cappts;
	long lines, unreadable;
	size_t shown;		/* bytes shown of one code/output/traceback */
};

/* report_read.c */
/* Reads every line of r->f (r->path names it in errors); 0, -1 with
 * errno when the file cannot be read or memory runs out, or -2 when it is
 * not a journal (its first line is not a run record; said). Unreadable
 * lines are entries, each named on stderr with its line number. */
int report_read(struct report *r);
void report_clear(struct report *r);
/* The record at where, read again: a new object, or NULL. */
json_t *report_reread(const struct report *r, const struct rline *where);
/* A short name for a JSON value's text: its string, else NULL. */
const char *report_jstr(const json_t *o, const char *key);

/* report_html.c: every byte from the journal goes out through these. */
void html_raw(FILE *f, const char *markup);
void html_fmt(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2,
    3)));
/* Text escaped for HTML (element content and quoted attributes): invalid
 * UTF-8 replaced, control characters made visible. */
void html_text(FILE *f, const char *s, size_t n);
void html_str(FILE *f, const char *s);		/* NUL-terminated; NULL: "" */
/* At most cap bytes of s (head and tail), with a marker saying how many
 * bytes are not shown between them. */
void html_capped(FILE *f, const char *s, size_t n, size_t cap);
/* A JSON value of a record, compact, escaped, at most cap bytes. */
void html_json(FILE *f, const json_t *v, size_t cap);
void html_time(FILE *f, double wall);		/* UTC, or "?" */
void html_dur(FILE *f, double secs);		/* "1.2 s", "35 ms", "?" */
void html_kb(FILE *f, long long kb);		/* "15.1 MB", "?" */
/* A class name for a status or kind: the known ones, else "other". */
const char *html_class(const char *name);

/* report_net.c: the connections through the egress proxy, if any */
void report_network(const struct report *r);

/* report_page.c */
void report_page(const struct report *r, const char *nonce);
/* The meaning of a stop's exit status. */
const char *report_exit_meaning(long long rc);

/* report_cells.c */
void report_timeline(const struct report *r);
void report_table(const struct report *r);
void report_details(const struct report *r);

/* report_chart.c */
void report_chart(const struct report *r);

#endif
