/*
 * test_past.c - unit tests for supervisor/cells/past.c: the journal read
 * back for --resume, typed: the run record, the last usage, the resumes,
 * the stop at the end, the operator's stop, cells restored with their
 * journal places (one cut by the restart), successors keyed by cell (the
 * last one wins), the notes after the last note_delivered, the model
 * calls cut by the restart, and the last budgets the operator set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "supervisor/cells/cells.h"
#include "supervisor/cells/journal.h"
#include "supervisor/cells/past.h"

static char dir[] = "/tmp/agentz-test-past-XXXXXX";

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

/* The journal holding text, opened (*j) and read back. */
static struct journal_past *
past_of(const char *name, const char *text, struct journal **j)
{
	char path[256], *err = NULL;
	struct journal_past *p;
	FILE *f;

	(void)snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	*j = journal_open(path, NULL, &err);
	assert_non_null(*j);
	p = journal_past_load(*j, path, &err);
	if (p == NULL)
		fail_msg("refused: %s", err != NULL ? err : "out of memory");
	return p;
}

#define R(body) "{\"v\":1," body "}\n"

static const char run_text[] =
	R("\"type\":\"run\",\"task\":\"the task\",\"model\":\"m\",\"at\":12.5")
	R("\"type\":\"input\",\"cell\":0,\"code\":\"x = 1\",\"summary\":\"one\"")
	R("\"type\":\"call\",\"id\":0,\"estimated\":10")
	R("\"type\":\"call\",\"id\":1,\"estimated\":20")
	R("\"type\":\"successor\",\"cell\":0,\"code\":\"a\",\"summary\":\"s1\"")
	R("\"type\":\"call\",\"id\":0,\"estimated\":15")
	R("\"type\":\"usage\",\"tokens\":100,\"estimated\":0,\"cost\":0.25,"
	    "\"calls\":[1]")
	R("\"type\":\"successor\",\"cell\":0,\"code\":\"bb\",\"summary\":\"s2\","
	    "\"repair\":true")
	R("\"type\":\"output\",\"cell\":0,\"status\":\"ok\"")
	R("\"type\":\"call\",\"id\":4,\"estimated\":7")
	R("\"type\":\"operator\",\"command\":\"pause\"")
	R("\"type\":\"note\",\"text\":\"n0\"")
	R("\"type\":\"note_delivered\",\"notes\":1")
	R("\"type\":\"operator\",\"command\":\"stop --now\"")
	R("\"type\":\"operator\",\"command\":\"stop\"")
	R("\"type\":\"note\",\"text\":\"n1\"")
	R("\"type\":\"note\",\"text\":5")
	R("\"type\":\"resume\",\"task\":\"the task\",\"model\":\"m\",\"at\":20")
	R("\"type\":\"note\",\"text\":\"n2\"")
	R("\"type\":\"input\",\"cell\":1,\"code\":\"y = 2\"")
	R("\"type\":\"successor\",\"cell\":1,\"code\":\"z\",\"summary\":\"s3\","
	    "\"repair\":false")
	R("\"type\":\"usage\",\"tokens\":120,\"estimated\":0")
	R("\"type\":\"resume\",\"task\":\"the task\",\"model\":\"m\",\"at\":30");

static void
test_past_run(void **state)
{
	struct journal *j;
	struct journal_past *p = past_of("run.jsonl", run_text, &j);
	const char *reason = NULL;
	long long rc = -1;
	double at = 0, usd = -1;

	(void)state;
	assert_false(journal_past_empty(p));
	assert_string_equal(journal_past_task(p, &at), "the task");
	assert_true(at == 12.5);
	/* the last usage record: its tokens, no cost */
	assert_int_equal(journal_past_tokens(p), 120);
	assert_int_equal(journal_past_cost(p, &usd), 0);
	assert_int_equal(journal_past_resumes(p), 2);
	assert_int_equal(journal_past_ended(p, &rc, &reason), 0);
	/* the first operator record that stopped the run */
	assert_string_equal(journal_past_operator_stop(p), "stop --now");
	journal_past_free(p);
	journal_close(j);
}

static void
test_past_cells(void **state)
{
	struct journal *j;
	struct journal_past *p = past_of("cells.jsonl", run_text, &j);
	struct past_successor s;
	struct cells h;
	struct cell *c;
	int finished = -1;

	(void)state;
	cells_init(&h, 1024);
	c = journal_past_cell(p, &h, 0, &finished);
	assert_non_null(c);
	assert_int_equal(c->n, 0);
	assert_int_equal(finished, 1);
	assert_int_equal(c->status, CELL_OK);
	assert_string_equal(c->summary, "one");
	assert_int_equal(h.slot[0].in_len > 0 && h.slot[0].out_len > 0, 1);
	c = journal_past_cell(p, &h, 1, &finished);
	assert_non_null(c);
	assert_int_equal(c->n, 1);
	assert_int_equal(finished, 0);	/* cut by the restart */
	assert_int_equal(c->kind, KIND_RESTART);
	assert_int_equal(h.slot[1].in_len > 0, 1);
	assert_int_equal(h.slot[1].out_len, 0);
	assert_null(journal_past_cell(p, &h, 2, &finished));
	assert_int_equal(h.n, 2);
	/* successors by cell: the last one of cell 0 */
	assert_int_equal(journal_past_successor(p, 0, &s), 1);
	assert_int_equal(s.len, 2);
	assert_memory_equal(s.code, "bb", 2);
	assert_string_equal(s.summary, "s2");
	assert_int_equal(s.repair, PAST_REPAIR_YES);
	assert_int_equal(journal_past_successor(p, 1, &s), 1);
	assert_string_equal(s.code, "z");
	assert_int_equal(s.repair, PAST_REPAIR_NO);
	assert_int_equal(journal_past_successor(p, 2, &s), 0);
	cells_clear(&h);
	journal_past_free(p);
	journal_close(j);
}

static void
test_past_notes_and_calls(void **state)
{
	struct journal *j;
	struct journal_past *p = past_of("calls.jsonl", run_text, &j);
	const long long *ids;
	long long tokens = -1;

	(void)state;
	/* after the last note_delivered, the string ones */
	assert_string_equal(journal_past_note(p, 0), "n1");
	assert_string_equal(journal_past_note(p, 1), "n2");
	assert_null(journal_past_note(p, 2));
	/* 1 settled; 0 (its last estimate) and 4 cut, in their order */
	assert_int_equal(journal_past_cut_calls(p, &ids, &tokens), 2);
	assert_int_equal(ids[0], 0);
	assert_int_equal(ids[1], 4);
	assert_int_equal(tokens, 15 + 7);
	assert_int_equal(journal_past_next_call(p), 5);
	journal_past_free(p);
	journal_close(j);
}

static void
test_past_ended(void **state)
{
	struct journal *j;
	struct journal_past *p = past_of("ended.jsonl",
	    R("\"type\":\"run\",\"task\":\"t\",\"model\":\"m\",\"at\":1")
	    R("\"type\":\"usage\",\"tokens\":3,\"cost\":0.5")
	    R("\"type\":\"usage\",\"tokens\":9,\"cost\":1.5,\"calls\":[0]")
	    R("\"type\":\"note_delivered\",\"notes\":1")
	    R("\"type\":\"stop\",\"exit\":3,\"reason\":\"budget\""), &j);
	const char *reason = NULL;
	const long long *ids;
	long long rc = -1, tokens = -1;
	double usd = -1;

	(void)state;
	assert_int_equal(journal_past_tokens(p), 9);
	assert_int_equal(journal_past_cost(p, &usd), 1);
	assert_true(usd == 1.5);
	assert_int_equal(journal_past_ended(p, &rc, &reason), 1);
	assert_int_equal(rc, 3);
	assert_string_equal(reason, "budget");
	assert_int_equal(journal_past_resumes(p), 0);
	assert_null(journal_past_operator_stop(p));
	assert_null(journal_past_note(p, 0));
	assert_int_equal(journal_past_cut_calls(p, &ids, &tokens), 0);
	assert_int_equal(tokens, 0);
	assert_int_equal(journal_past_next_call(p), 0);
	journal_past_free(p);
	journal_close(j);
}

static void
test_past_empty(void **state)
{
	struct journal *j;
	struct journal_past *p = past_of("empty.jsonl", "", &j);
	double at = -1;

	(void)state;
	assert_true(journal_past_empty(p));
	assert_null(journal_past_task(p, &at));
	assert_int_equal(journal_past_tokens(p), 0);
	journal_past_free(p);
	journal_close(j);
}

static void
test_past_budgets(void **state)
{
	static const char text[] =
	    R("\"type\":\"run\",\"task\":\"t\",\"model\":\"m\",\"at\":1")
	    R("\"type\":\"budgets\",\"by\":\"operator\",\"max_cells\":3,"
		"\"deadline\":10,\"max_tokens\":0,\"max_cost\":0,"
		"\"max_same_failure\":2,\"max_parallel_calls\":4,\"at\":2")
	    R("\"type\":\"budgets\",\"by\":\"operator\",\"max_cells\":7,"
		"\"deadline\":3600.5,\"max_tokens\":900,\"max_cost\":1.5,"
		"\"at\":3");
	struct journal *j;
	struct journal_past *p = past_of("budgets.jsonl", text, &j);
	struct past_budgets b;

	(void)state;
	/* the last one wins; the fields it lacks say -1 */
	assert_int_equal(journal_past_budgets(p, &b), 1);
	assert_int_equal(b.max_cells, 7);
	assert_true(b.deadline == 3600.5 && b.max_cost == 1.5 && b.at == 3);
	assert_int_equal(b.max_tokens, 900);
	assert_int_equal(b.max_same_failure, -1);
	assert_int_equal(b.max_parallel_calls, -1);
	assert_int_equal(b.max_egress_bytes, -1);
	assert_string_equal(b.by, "operator");
	journal_past_free(p);
	journal_close(j);
	/* none in a journal without one */
	p = past_of("nobudgets.jsonl", run_text, &j);
	assert_int_equal(journal_past_budgets(p, &b), 0);
	assert_int_equal(journal_past_egress_bytes(p), 0);
	journal_past_free(p);
	journal_close(j);
}

/* The egress budget journaled, and the bytes of the connections seen to
 * close (a held or refused one has none; junk counts nothing). */
static void
test_past_egress(void **state)
{
	static const char text[] =
	    R("\"type\":\"run\",\"task\":\"t\",\"model\":\"m\",\"at\":1")
	    R("\"type\":\"egress\",\"what\":\"held\",\"conn\":1")
	    R("\"type\":\"egress\",\"what\":\"closed\",\"conn\":1,"
		"\"up\":100,\"down\":5000")
	    R("\"type\":\"egress\",\"what\":\"closed\",\"conn\":2,"
		"\"up\":-7,\"down\":\"x\"")
	    R("\"type\":\"egress\",\"what\":\"refused\",\"conn\":3,"
		"\"up\":9,\"down\":9")
	    R("\"type\":\"egress\",\"what\":\"closed\",\"conn\":4,"
		"\"up\":1,\"down\":2")
	    R("\"type\":\"budgets\",\"by\":\"operator\",\"max_cells\":0,"
		"\"deadline\":0,\"max_tokens\":0,\"max_cost\":0,"
		"\"max_egress_bytes\":65536,\"at\":3");
	struct journal *j;
	struct journal_past *p = past_of("egress.jsonl", text, &j);
	struct past_budgets b;

	(void)state;
	assert_int_equal(journal_past_egress_bytes(p), 5103);
	assert_int_equal(journal_past_budgets(p, &b), 1);
	assert_int_equal(b.max_egress_bytes, 65536);
	journal_past_free(p);
	journal_close(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_past_run),
		cmocka_unit_test(test_past_cells),
		cmocka_unit_test(test_past_notes_and_calls),
		cmocka_unit_test(test_past_ended),
		cmocka_unit_test(test_past_empty),
		cmocka_unit_test(test_past_budgets),
		cmocka_unit_test(test_past_egress),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
