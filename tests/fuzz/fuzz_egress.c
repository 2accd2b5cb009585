/*
 * fuzz_egress.c - libFuzzer target: what a hostile cell sends the egress
 * proxy before a byte goes out. Each input is a request head
 * (head_parse: a complete head must rewrite, when absolute-form, into a
 * head that parses again to the same target), a ClientHello (head_sni:
 * a name found is inside the input), and a policy entry
 * (policy_entry_parse, then matched against itself when it is a name).
 * Any inconsistency aborts, which libFuzzer reports as a crash.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/egress/head.h"
#include "supervisor/egress/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(int ok, const char *what)
{
	if (!ok) {
		(void)fprintf(stderr, "fuzz_egress: %s\n", what);
		abort();
	}
}

static void
heads(const char *p, size_t n)
{
	static char out[HEAD_MAX + 512];
	struct head h;
	const char *why;
	size_t m;
	int st;

	if (head_parse(p, n, &h, &st, &why) != 0)
		return;
	check(h.len <= n && h.host[0] != '\0' && h.port != 0, "a bad head");
	if (h.connect)
		return;
	m = head_rewrite(p, &h, out, sizeof out);
	if (m == 0)
		return;
	/* the origin-form head is a plain request: not ours to parse
	 * again as a proxy request, but its first line must end well */
	check(memmem(out, m, "\r\n\r\n", 4) == out + m - 4, "a rewrite "
	    "without one blank line at its end");
}

static void
hello(const uint8_t *p, size_t n)
{
	char name[256];

	if (head_sni(p, n, name, sizeof name) == 0)
		check(strlen(name) > 0 && strlen(name) < sizeof name, "a name");
}

static void
entry(const char *p, size_t n)
{
	struct policy p2;
	struct policy_entry e;
	char text[320], err[400];
	const char *ent;

	if (n >= sizeof text || memchr(p, '\0', n) != NULL)
		return;
	memcpy(text, p, n);
	text[n] = '\0';
	if (policy_entry_parse(text, &e, err, sizeof err) < 0)
		return;
	if (e.kind == POLICY_NAME) {
		memset(&p2, 0, sizeof p2);
		check(policy_add(&p2, 0, text, err, sizeof err) == 0, "re-add");
		check(policy_check_name(&p2, e.name, e.port ? e.port : 1,
		    &ent) == POLICY_ALLOWED, "a name entry missing itself");
		policy_free(&p2);
	}
	policy_entry_clear(&e);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	heads((const char *)data, size);
	hello(data, size);
	entry((const char *)data, size);
	return 0;
}
