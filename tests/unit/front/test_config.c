/*
 * test_config.c - unit tests for supervisor/front/config.c: size parsing
 * and which model URLs need a key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/size.h"
#include "supervisor/front/config.h"

static void
test_size_parse(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(size_parse("1024", &v), 0);
	assert_int_equal(v, 1024);
	assert_int_equal(size_parse("64K", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(size_parse("1.5M", &v), 0);
	assert_int_equal(v, 1572864);
	assert_int_equal(size_parse("4GiB", &v), 0);
	assert_int_equal(v, (uint64_t)4 << 30);
	assert_int_equal(size_parse("lots", &v), -1);
	assert_int_equal(size_parse("-1", &v), -1);
	assert_int_equal(size_parse("5X", &v), -1);
	assert_int_equal(size_parse("", &v), -1);
}

/* Exactly, in the largest unit that divides: what an error names. */
static void
test_size_format(void **state)
{
	char b[32];

	(void)state;
	size_format((uint64_t)64 << 20, b, sizeof b);
	assert_string_equal(b, "64M");
	size_format(4096, b, sizeof b);
	assert_string_equal(b, "4K");
	size_format((uint64_t)3 << 30, b, sizeof b);
	assert_string_equal(b, "3G");
	size_format(1536, b, sizeof b);
	assert_string_equal(b, "1536 bytes");
	size_format(0, b, sizeof b);
	assert_string_equal(b, "0 bytes");
	size_format((uint64_t)1 << 40, b, sizeof b);
	assert_string_equal(b, "1024G");
}

/* Only OpenAI's own host needs a key; local servers and proxies do not. */
static void
test_config_needs_key(void **state)
{
	(void)state;
	assert_true(config_needs_key("https://api.openai.com/v1"));
	assert_true(config_needs_key("HTTPS://API.OpenAI.com/v1"));
	assert_true(config_needs_key("https://api.openai.com:443/v1"));
	assert_true(config_needs_key("https://api.openai.com./v1"));
	assert_true(config_needs_key("https://u:p@api.openai.com/v1"));
	assert_true(config_needs_key("api.openai.com/v1"));
	assert_false(config_needs_key("http://127.0.0.1:8080/v1"));
	assert_false(config_needs_key("http://localhost/proxy/api.openai.com/v1"));
	assert_false(config_needs_key("http://api.openai.com.localhost:9/v1"));
	assert_false(config_needs_key("http://api.openai.com@127.0.0.1/v1"));
	assert_false(config_needs_key("https://openrouter.ai/api/v1"));
	assert_false(config_needs_key("http://x/v1?u=api.openai.com"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_parse),
		cmocka_unit_test(test_size_format),
		cmocka_unit_test(test_config_needs_key),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
