/*
 * sse_helpers.h - what the SSE and response tests share: a seeded
 * generator, checks that say which case failed, reading a file, walking a
 * JSON path. Inline where not every test file uses them.
 */
#ifndef AGENTZ_TEST_SSE_HELPERS_H
#define AGENTZ_TEST_SSE_HELPERS_H

static inline int
feed(struct response *r, const char *event, const char *json)
{
	return response_feed(r, event, json, strlen(json));
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* --- helpers ----------------------------------------------------------- */

static inline uint64_t
rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void
check_str(const char *ctx, const char *what, const char *got,
    const char *want)
{
	if (got == NULL && want == NULL)
		return;
	if (got == NULL || want == NULL || strcmp(got, want) != 0)
		fail_msg("%s: %s is \"%s\", want \"%s\"", ctx, what,
		    got != NULL ? got : "(null)",
		    want != NULL ? want : "(null)");
}

static inline void
check_prefix(const char *ctx, const char *what, const char *got,
    const char *want)
{
	if (got == NULL || strncmp(got, want, strlen(want)) != 0)
		fail_msg("%s: %s is \"%.80s\", want it to start with \"%s\"",
		    ctx, what, got != NULL ? got : "(null)", want);
}

static inline void
check_num(const char *ctx, const char *what, long long got, long long want)
{
	if (got != want)
		fail_msg("%s: %s is %lld, want %lld", ctx, what, got, want);
}

static inline char *
read_file(const char *path, size_t *lenp)
{
	FILE *f;
	char *buf = NULL;
	long n = 0;

	*lenp = 0;
	if ((f = fopen(path, "rbe")) == NULL) {
		fail_msg("cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0)
		fail_msg("cannot size %s", path);
	assert_non_null(buf = malloc((size_t)n + 1));
	if (fread(buf, 1, (size_t)n, f) != (size_t)n)
		fail_msg("cannot read %s", path);
	buf[n] = '\0';
	assert_int_equal(fclose(f), 0);
	*lenp = (size_t)n;
	return buf;
}

/* Walk "a/0/b" through objects and arrays; a string value or NULL. */
static inline json_t *
path_get(json_t *v, const char *path)
{
	char seg[128];
	const char *p = path;
	size_t n;

	while (v != NULL && *p != '\0') {
		n = strcspn(p, "/");
		assert_true(n < sizeof(seg));
		memcpy(seg, p, n);
		seg[n] = '\0';
		p += n + (p[n] == '/');
		if (json_is_array(v))
			v = json_array_get(v, strtoul(seg, NULL, 10));
		else
			v = json_object_get(v, seg);
	}
	return v;
}

static inline const char *
path_str(json_t *v, const char *path)
{
	return json_string_value(path_get(v, path));
}

#endif
