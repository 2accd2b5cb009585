/*
 * test_history.c - unit tests for supervisor/cells/history.c: history
 * slicing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "supervisor/cells/cells.h"
#include "supervisor/cells/history.h"

static json_t *
slice(struct cells *hist, const char *args)
{
	char *err = NULL, *s = history_slice(hist, args, &err);
	json_t *r = s != NULL ? json_loads(s, 0, NULL) : NULL;

	if (s == NULL) {
		assert_non_null(err);
		free(err);
	}
	free(s);
	return r;
}

static size_t
sliced(struct cells *hist, const char *args, int *first)
{
	json_t *r = slice(hist, args), *cells;
	size_t n;

	assert_non_null(r);
	cells = json_object_get(r, "cells");
	n = json_array_size(cells);
	*first = n > 0 ? (int)json_integer_value(json_object_get(
	    json_array_get(cells, 0), "cell")) : -1;
	json_decref(r);
	return n;
}

static void
test_history_slices_like_python(void **state)
{
	struct cells hist;
	json_t *r;
	int first, i;

	(void)state;
	cells_init(&hist, 1024);
	for (i = 0; i < 5; i++)
		assert_non_null(cells_begin(&hist, "x", 1, NULL, NULL, -1));
	r = slice(&hist, "{}");
	assert_int_equal(json_integer_value(json_object_get(r, "total")), 5);
	assert_null(json_object_get(r, "cells"));
	json_decref(r);
	assert_int_equal(sliced(&hist, "{\"start\": null, \"end\": null}",
	    &first), 0);
	assert_int_equal(sliced(&hist, "{\"start\": -2}", &first), 2);
	assert_int_equal(first, 3);
	assert_int_equal(sliced(&hist, "{\"start\": 1, \"end\": -1}", &first), 3);
	assert_int_equal(first, 1);
	assert_int_equal(sliced(&hist, "{\"start\": -100, \"end\": 2}", &first),
	    2);
	assert_int_equal(first, 0);
	assert_int_equal(sliced(&hist, "{\"start\": 10}", &first), 0);
	assert_int_equal(sliced(&hist, "{\"start\": 3, \"end\": 1}", &first), 0);
	assert_int_equal(sliced(&hist, "{\"end\": 1}", &first), 1);
	assert_null(slice(&hist, "{\"start\": \"1\"}"));
	assert_null(slice(&hist, "{\"start\": 1.5}"));
	assert_null(slice(&hist, "{\"end\": true}"));
	cells_clear(&hist);
}

static void
test_history_slice_is_cut_at_the_reply_bound(void **state)
{
	struct cells hist;
	char code[1000];
	json_t *r, *t;
	int i;

	(void)state;
	memset(code, 'c', sizeof code);
	cells_init(&hist, 1024);
	cells_set_limits(&hist, 0, 3500);
	for (i = 0; i < 5; i++)
		assert_non_null(cells_begin(&hist, code, sizeof code, NULL, NULL,
		    -1));
	r = slice(&hist, "{\"start\": 1}");
	assert_int_equal(json_array_size(json_object_get(r, "cells")), 2);
	t = json_object_get(r, "truncated");
	assert_int_equal(json_integer_value(json_object_get(t, "next_start")),
	    3);
	assert_non_null(strstr(json_string_value(json_object_get(t, "note")),
	    "start=3"));
	json_decref(r);
	cells_set_limits(&hist, 0, 1000);	/* one record is over it */
	r = slice(&hist, "{\"start\": 4}");
	t = json_array_get(json_object_get(r, "cells"), 0);
	assert_int_equal(json_integer_value(json_object_get(t, "cell")), 4);
	assert_non_null(json_object_get(t, "omitted"));
	json_decref(r);
	cells_clear(&hist);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_history_slices_like_python),
		cmocka_unit_test(test_history_slice_is_cut_at_the_reply_bound),
	};

	return cmocka_run_group_tests_name("history", tests, NULL, NULL);
}
