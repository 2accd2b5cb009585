/*
 * test_ctlfind.c - unit tests for supervisor/front/ctlfind.c: which
 * sockets a name may mean, and each run's handle (issue 22).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/front/ctlfind.h"

static void
test_family(void **state)
{
	(void)state;
	assert_true(ctl_found_family("journal", "journal"));
	assert_true(ctl_found_family("journal-24159", "journal"));
	assert_true(ctl_found_family("journal", "journal-24159"));
	assert_true(ctl_found_family("journal-24159", "journal-24159"));
	assert_true(ctl_found_family("journal-7", "journal-24159"));
	assert_false(ctl_found_family("journals", "journal"));
	assert_false(ctl_found_family("journal-x", "journal"));
	assert_false(ctl_found_family("journal-", "journal"));
	assert_false(ctl_found_family("jour", "journal"));
	assert_false(ctl_found_family("other", "journal-24159"));
	/* a name of its own that ends in -DIGITS: it, and the runs it may
	 * be NAME-PID of */
	assert_true(ctl_found_family("job-7", "job-7"));
	assert_true(ctl_found_family("job-7-300", "job-7"));
	assert_true(ctl_found_family("job", "job-7"));
	assert_false(ctl_found_family("job-7", "-7"));
}

/* One found socket, as ctl_found_ask would leave it. */
static void
set(struct ctl_found *f, const char *path, const char *stem,
    const char *name, long long pid, int searched)
{
	memset(f, 0, sizeof *f);
	f->path = strdup(path);
	f->stem = strdup(stem);
	f->name = strdup(name);
	f->pid = pid;
	f->searched = searched;
	f->status = pid > 0 ? strdup("{}") : NULL;
}

static void
test_handles(void **state)
{
	struct ctl_found v[5];
	struct ctl_founds fs = { v, 5, 5 };

	(void)state;
	set(&v[0], "/rt/journal.sock", "journal", "journal", 100, 1);
	set(&v[1], "/rt/journal-200.sock", "journal-200", "journal", 200, 1);
	set(&v[2], "/rt/alone.sock", "alone", "alone", 300, 1);
	set(&v[3], "/rt/gone.sock", "gone", "gone", 0, 1);
	set(&v[4], "/srv/far.sock", "far", "far", 400, 0);
	ctl_found_handles(&fs);
	assert_string_equal(v[0].handle, "journal-100");
	assert_string_equal(v[1].handle, "journal-200");
	assert_string_equal(v[2].handle, "alone");
	assert_string_equal(v[3].handle, "gone");	/* nobody answers */
	assert_string_equal(v[4].handle, "/srv/far.sock");
	/* the other "journal" gone: the name is the one run's again */
	free(v[1].status);
	v[1].status = NULL;
	ctl_found_handles(&fs);
	assert_string_equal(v[0].handle, "journal");
	fs.v = malloc(sizeof v);
	memcpy(fs.v, v, sizeof v);
	ctl_found_free(&fs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_family),
		cmocka_unit_test(test_handles),
	};

	return cmocka_run_group_tests_name("ctlfind", tests, NULL, NULL);
}
