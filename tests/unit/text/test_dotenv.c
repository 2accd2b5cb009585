/*
 * test_dotenv.c - supervisor/text/dotenv.c: what a .env may be.
 *
 * A cell can leave anything named .env in a folder: only a regular file
 * is read. A FIFO or a link to /dev/zero hung the reader, so every case
 * runs under an alarm: a hang fails the test with SIGALRM instead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/text/dotenv.h"

static char dir[64];
static char path[96];

static int
setup(void **state)
{
	(void)state;
	(void)snprintf(dir, sizeof dir, "/tmp/agentz-dotenv-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	(void)snprintf(path, sizeof path, "%s/.env", dir);
	(void)unsetenv("DOTENV_T");
	(void)alarm(10);
	return 0;
}

static int
teardown(void **state)
{
	char other[128];

	(void)state;
	(void)alarm(0);
	(void)unlink(path);
	(void)rmdir(path);
	(void)snprintf(other, sizeof other, "%s/real", dir);
	(void)unlink(other);
	return rmdir(dir);
}

static void
write_file(const char *p, const char *text, size_t pad)
{
	FILE *f = fopen(p, "w");

	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	while (pad-- > 0)
		assert_true(fputc('y', f) != EOF);
	assert_int_equal(fclose(f), 0);
}

static void
test_regular_file_is_loaded(void **state)
{
	(void)state;
	write_file(path, "DOTENV_T=ok\n", 0);
	assert_int_equal(dotenv_load(path), 1);
	assert_string_equal(getenv("DOTENV_T"), "ok");
}

static void
test_missing_file_is_nothing(void **state)
{
	(void)state;
	assert_int_equal(dotenv_load(path), 0);
}

static void
test_fifo_is_refused_at_once(void **state)
{
	(void)state;
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(dotenv_load(path), -1);
	assert_null(getenv("DOTENV_T"));
}

static void
test_link_to_dev_zero_is_refused(void **state)
{
	(void)state;
	assert_int_equal(symlink("/dev/zero", path), 0);
	assert_int_equal(dotenv_load(path), -1);
}

static void
test_link_to_a_regular_file_is_refused(void **state)
{
	char real[128];

	(void)state;
	(void)snprintf(real, sizeof real, "%s/real", dir);
	write_file(real, "DOTENV_T=linked\n", 0);
	assert_int_equal(symlink(real, path), 0);
	assert_int_equal(dotenv_load(path), -1);
	assert_null(getenv("DOTENV_T"));
}

static void
test_folder_is_refused(void **state)
{
	(void)state;
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(dotenv_load(path), -1);
}

static void
test_over_the_cap_is_refused(void **state)
{
	(void)state;
	write_file(path, "DOTENV_T=", DOTENV_MAX);
	assert_int_equal(dotenv_load(path), -1);
	assert_null(getenv("DOTENV_T"));
}

static void
test_near_the_cap_is_loaded(void **state)
{
	FILE *f;
	int i;

	(void)state;
	f = fopen(path, "w");
	assert_non_null(f);
	/* 655 comment lines of 100 bytes and the variable: 65511 bytes */
	for (i = 0; i < 655; i++)
		assert_true(fprintf(f, "#%098d\n", i) == 100);
	assert_true(fputs("DOTENV_T=1\n", f) >= 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(dotenv_load(path), 1);
	assert_string_equal(getenv("DOTENV_T"), "1");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_regular_file_is_loaded,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_file_is_nothing,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_fifo_is_refused_at_once,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_link_to_dev_zero_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_link_to_a_regular_file_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_folder_is_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_over_the_cap_is_refused,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_near_the_cap_is_loaded,
		    setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
