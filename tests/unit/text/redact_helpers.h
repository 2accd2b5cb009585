/*
 * redact_helpers.h - what the redaction tests share: the emit callback's
 * output buffer, a set from a list, one-shot redaction compared.
 */
#ifndef AGENTZ_TEST_REDACT_HELPERS_H
#define AGENTZ_TEST_REDACT_HELPERS_H

#define NITEMS(a)	(sizeof(a) / sizeof((a)[0]))
#define M		REDACT_MARKER

/* A growable output buffer, the emit callback's ctx. */
struct out {
	char	*p;
	size_t	 len, cap;
	size_t	 calls;
};

/* One secret for the reference. */
struct sec {
	const char	*p;
	size_t		 len;
};

/* ------------------------------------------------------------- helpers */

static struct redact *
set_of(const char *const *secrets, size_t n)
{
	struct redact *r = redact_new();
	size_t i;

	assert_non_null(r);
	for (i = 0; i < n; i++)
		assert_int_equal(redact_add(r, secrets[i], strlen(secrets[i])),
		    0);
	return r;
}

/* One-shot redaction of a C string, compared with want. */
static void
expect_one(const struct redact *r, const char *text, const char *want)
{
	size_t len = 0;
	char *got = redact_string(r, text, strlen(text), &len);

	assert_non_null(got);
	assert_string_equal(got, want);
	assert_int_equal(len, strlen(want));
	free(got);
}

#endif
