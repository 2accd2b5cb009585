/*
 * test_journal.c - the journal file and its records read back: what
 * journal_open refuses before reading or cutting anything (a link, a
 * directory, a FIFO, a second name), and journal_load's consistency
 * checks (cells in order, one input and one output each, sane usage),
 * each naming FILE:LINE and what is wrong; a record's states (enums)
 * written as the journal's strings and read back.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "supervisor/cells/cells.h"
#include "supervisor/cells/journal.h"
#include "supervisor/cells/record_json.h"

static char dir[] = "/tmp/agentz-test-journal-XXXXXX";

static int
setup(void **state)
{
	(void)state;
	return mkdtemp(dir) != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	(void)snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* journal_open on path refuses, *err holding want. */
static void
refused(const char *path, const char *want)
{
	char *err = NULL;
	struct journal *j = journal_open(path, NULL, &err);

	assert_null(j);
	assert_non_null(err);
	if (strstr(err, want) == NULL)
		fail_msg("%s: \"%s\" does not say \"%s\"", path, err, want);
	free(err);
}

static void
test_open_refuses(void **state)
{
	char target[256], link_[256], fifo[256], hard[256], d[256];
	struct stat st;

	(void)state;
	(void)snprintf(target, sizeof target, "%s/target", dir);
	(void)snprintf(link_, sizeof link_, "%s/link.jsonl", dir);
	(void)snprintf(fifo, sizeof fifo, "%s/fifo.jsonl", dir);
	(void)snprintf(hard, sizeof hard, "%s/hard.jsonl", dir);
	(void)snprintf(d, sizeof d, "%s/d", dir);
	write_file(target, "{\"v\":1}\ntorn tail");
	assert_int_equal(symlink(target, link_), 0);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(link(target, hard), 0);
	assert_int_equal(mkdir(d, 0700), 0);
	refused(link_, "symbolic link");
	refused(fifo, "not a regular file");
	refused(hard, "has 2 names");
	refused(d, "is a directory");
	/* nothing was cut: the torn tail is still there */
	assert_int_equal(stat(target, &st), 0);
	assert_int_equal(st.st_size, 17);
}

/* journal_load of text: NULL and err holding want, or the records. */
static void
load(const char *text, const char *want)
{
	char path[256], *err = NULL;
	struct journal *j;
	json_t *recs;

	(void)snprintf(path, sizeof path, "%s/j.jsonl", dir);
	(void)unlink(path);
	write_file(path, text);
	j = journal_open(path, NULL, &err);
	assert_non_null(j);
	recs = journal_load(j, path, &err);
	if (want == NULL) {
		if (recs == NULL)
			fail_msg("refused: %s", err);
		json_decref(recs);
	} else {
		assert_null(recs);
		assert_non_null(err);
		if (strstr(err, want) == NULL)
			fail_msg("\"%s\" does not say \"%s\"", err, want);
		free(err);
	}
	journal_close(j);
}

#define RUN "{\"v\":1,\"type\":\"run\",\"task\":\"t\",\"model\":\"m\"," \
	"\"at\":1}\n"
#define IN(n) "{\"v\":1,\"type\":\"input\",\"cell\":" #n ",\"code\":\"x\"}\n"
#define OUT(n) "{\"v\":1,\"type\":\"output\",\"cell\":" #n \
	",\"status\":\"ok\"}\n"

static void
test_load_consistency(void **state)
{
	(void)state;
	load(RUN IN(0) OUT(0) IN(1) OUT(1), NULL);
	load(RUN IN(0) "{\"v\":1,\"type\":\"usage\",\"tokens\":5,"
	    "\"estimated\":2,\"cost\":0.5,\"calls\":[0]}\n"
	    "{\"v\":1,\"type\":\"call\",\"id\":1,\"estimated\":9}\n", NULL);
	load(RUN IN(0) IN(0), ":3: corrupt journal record (a second input "
	    "for cell 0)");
	load(RUN IN(1), ":2: corrupt journal record (an input for cell 1 "
	    "where cell 0 comes next)");
	load(RUN IN(0) OUT(0) OUT(0), ":4: corrupt journal record (a second "
	    "output for cell 0)");
	load(RUN OUT(0), ":2: corrupt journal record (a output for cell 0, "
	    "which has no input)");
	load(RUN "{\"v\":1,\"type\":\"successor\",\"cell\":3,\"code\":\"x\","
	    "\"summary\":\"s\"}\n", "a successor for cell 3, which has no input");
	load(RUN "{\"v\":1,\"type\":\"usage\",\"tokens\":-1}\n",
	    "a usage of -1 tokens");
	load(RUN "{\"v\":1,\"type\":\"usage\",\"tokens\":1000000000001}\n",
	    "a usage of 1000000000001 tokens");
	load(RUN "{\"v\":1,\"type\":\"usage\",\"tokens\":3,\"estimated\":4}\n",
	    "4 tokens estimated of 3");
	load(RUN "{\"v\":1,\"type\":\"usage\",\"tokens\":3,\"cost\":1e12}\n",
	    "a cost of 1e+12 USD");
	load(RUN "{\"v\":1,\"type\":\"call\",\"id\":0,\"estimated\":-1}\n",
	    "a model call estimated at -1 tokens");
}

/* A member of the outputs' JSON as a string (NULL: null or none). */
static const char *
out_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* The states are enums in struct cell; the JSON says them as it always
 * did, and the text maps back. */
static void
test_record_states(void **state)
{
	struct cells h;
	struct cell *c;
	json_t *o;

	(void)state;
	cells_init(&h, 1024);
	c = cells_begin(&h, "x", 1, NULL, NULL, -1);
	assert_non_null(c);
	o = cells_outputs_json(c);
	assert_true(json_is_null(json_object_get(o, "namespace")));
	assert_null(out_str(o, "snapshot"));
	assert_null(out_str(o, "recovered_by"));
	assert_null(json_object_get(o, "timeout"));
	json_decref(o);

	cells_finish_dead(c, KIND_TIMEOUT, "d", -1, 9);
	c->ns = NS_ROLLED_BACK;
	c->timeout_stage = TIMEOUT_KILLED;
	c->recovered_by = RECOVERY_SNAPSHOT;
	cells_set_snapshot(c, CSNAP_TAKEN, "ignored");
	o = cells_outputs_json(c);
	assert_string_equal(out_str(o, "namespace"),
	    "rolled back to before cell 0");
	assert_string_equal(out_str(o, "snapshot"), "taken");
	assert_string_equal(out_str(o, "recovered_by"), "snapshot");
	assert_string_equal(out_str(json_object_get(o, "timeout"), "stage"),
	    "killed");
	assert_int_equal(cells_ns_parse(out_str(o, "namespace")),
	    NS_ROLLED_BACK);
	json_decref(o);

	c->ns = NS_LOST;
	c->timeout_stage = TIMEOUT_INTERRUPTED;
	c->recovered_by = RECOVERY_FRESH;
	cells_set_snapshot(c, CSNAP_NONE, "--snapshot never");
	o = cells_outputs_json(c);
	assert_string_equal(out_str(o, "namespace"), "lost");
	assert_string_equal(out_str(o, "snapshot"), "none: --snapshot never");
	assert_string_equal(out_str(o, "recovered_by"), "fresh worker");
	assert_string_equal(out_str(json_object_get(o, "timeout"), "stage"),
	    "interrupted");
	json_decref(o);

	cells_set_snapshot(c, CSNAP_DIED, NULL);
	o = cells_outputs_json(c);
	assert_string_equal(out_str(o, "snapshot"), "taken, but it died "
	    "before it could take over (killed by the cell?)");
	json_decref(o);
	cells_set_snapshot(c, CSNAP_WORLD_LOST, NULL);
	o = cells_outputs_json(c);
	assert_string_equal(out_str(o, "snapshot"), "taken, but the run's "
	    "namespace init died, and the snapshot with it");
	json_decref(o);
	cells_set_snapshot(c, CSNAP_KILLED, NULL);
	o = cells_outputs_json(c);
	assert_string_equal(out_str(o, "snapshot"), "none: the snapshot was "
	    "killed before it was needed");
	json_decref(o);

	assert_int_equal(cells_ns_parse("lost"), NS_LOST);
	assert_int_equal(cells_ns_parse("kept"), NS_KEPT);
	assert_int_equal(cells_ns_parse(NULL), NS_KEPT);
	assert_int_equal(cells_timeout_parse("killed"), TIMEOUT_KILLED);
	assert_int_equal(cells_timeout_parse("interrupted"),
	    TIMEOUT_INTERRUPTED);
	assert_int_equal(cells_timeout_parse("other"), TIMEOUT_NONE);
	cells_clear(&h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_refuses),
		cmocka_unit_test(test_load_consistency),
		cmocka_unit_test(test_record_states),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
