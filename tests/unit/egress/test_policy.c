/*
 * test_policy.c - unit tests for supervisor/egress/policy.c: entries
 * parsed and refused (with the reason), names and suffixes matched
 * without case or trailing dot, ports, CIDRs of both families, deny over
 * allow, and the address classes refused unless an address entry names
 * them (loopback, link-local metadata, private, mapped and NAT64 IPv4).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/egress/policy.h"

static struct sockaddr_storage ss;

static const struct sockaddr *
sa(const char *text)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)&ss;

	memset(&ss, 0, sizeof ss);
	if (inet_pton(AF_INET, text, &a4->sin_addr) == 1)
		a4->sin_family = AF_INET;
	else {
		assert_int_equal(inet_pton(AF_INET6, text, &a6->sin6_addr), 1);
		a6->sin6_family = AF_INET6;
	}
	return (const struct sockaddr *)(void *)&ss;
}

static void
test_entries_refused(void **state)
{
	static const struct { const char *in, *why; } bad[] = {
		{ "", "empty" }, { "a b", "not a host name" },
		{ "x.com:0", "the port" }, { "x.com:65536", "the port" },
		{ "x.com:", "the port" }, { "10.0.0.1/8", "bits set" },
		{ "10.0.0.0/33", "prefix length" }, { "[::1", "no ']'" },
		{ "[1.2.3.4]", "IPv6" }, { "*.", "after '*.'" },
		{ "a..b", "not a host name" }, { "-", NULL },
		{ "[::1]x", "text after" },
	};
	struct policy_entry e;
	char err[200];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		assert_int_equal(policy_entry_parse(bad[i].in, &e, err,
		    sizeof err), bad[i].why ? -1 : 0);
		if (bad[i].why != NULL)
			assert_non_null(strstr(err, bad[i].why));
		else
			policy_entry_clear(&e);
	}
}

static void
test_names_ports_deny(void **state)
{
	struct policy p;
	char err[200];
	const char *entry;

	(void)state;
	memset(&p, 0, sizeof p);
	assert_int_equal(policy_add(&p, 0, "PyPI.org", err, sizeof err), 0);
	assert_int_equal(policy_add(&p, 0, "*.example.com", err, sizeof err),
	    0);
	assert_int_equal(policy_add(&p, 0, "api.x.io:443", err, sizeof err),
	    0);
	assert_int_equal(policy_add(&p, 0, "api.x.io:443", err, sizeof err),
	    0);			/* once */
	assert_int_equal(p.nallow, 3);
	assert_int_equal(policy_add(&p, 1, "bad.example.com", err,
	    sizeof err), 0);
	assert_int_equal(policy_check_name(&p, "pypi.org", 443, &entry),
	    POLICY_ALLOWED);
	assert_string_equal(entry, "PyPI.org");
	assert_int_equal(policy_check_name(&p, "pypi.org.", 80, &entry),
	    POLICY_ALLOWED);
	assert_int_equal(policy_check_name(&p, "files.pypi.org", 443,
	    &entry), POLICY_UNLISTED);
	assert_null(entry);
	assert_int_equal(policy_check_name(&p, "a.b.example.com", 1, &entry),
	    POLICY_ALLOWED);
	assert_int_equal(policy_check_name(&p, "example.com", 443, &entry),
	    POLICY_UNLISTED);
	assert_int_equal(policy_check_name(&p, "xexample.com", 443, &entry),
	    POLICY_UNLISTED);
	assert_int_equal(policy_check_name(&p, "bad.example.com", 443,
	    &entry), POLICY_DENIED);
	assert_string_equal(entry, "bad.example.com");
	assert_int_equal(policy_check_name(&p, "api.x.io", 443, &entry),
	    POLICY_ALLOWED);
	assert_int_equal(policy_check_name(&p, "api.x.io", 80, &entry),
	    POLICY_UNLISTED);
	/* an address literal matches no name entry */
	assert_int_equal(policy_check_name(&p, "1.2.3.4", 443, &entry),
	    POLICY_UNLISTED);
	assert_int_equal(policy_remove(&p, 0, "PyPI.org"), 1);
	assert_int_equal(policy_remove(&p, 0, "PyPI.org"), 0);
	assert_int_equal(policy_check_name(&p, "pypi.org", 443, &entry),
	    POLICY_UNLISTED);
	policy_free(&p);
}

static void
test_addresses(void **state)
{
	static const struct { const char *a; const char *cls; } t[] = {
		{ "127.0.0.1", "loopback" }, { "::1", "loopback" },
		{ "169.254.169.254", "link-local" }, { "10.9.8.7", "private" },
		{ "172.31.255.255", "private" }, { "172.32.0.1", NULL },
		{ "192.168.1.1", "private" }, { "100.64.0.1", "shared" },
		{ "0.0.0.0", "unspecified" }, { "224.0.0.1", "multicast" },
		{ "255.255.255.255", "reserved" }, { "8.8.8.8", NULL },
		{ "::ffff:127.0.0.1", "loopback" },
		{ "::ffff:169.254.169.254", "link-local" },
		{ "64:ff9b::a9fe:a9fe", "link-local" },
		{ "fd00::1", "private" }, { "fe80::1", "link-local" },
		{ "2002:7f00:1::", "loopback" }, { "2606:4700::1111", NULL },
		{ "::", "unspecified" },
	};
	const char *cls;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		cls = policy_addr_class(sa(t[i].a));
		if (t[i].cls == NULL)
			assert_null(cls);
		else {
			assert_non_null(cls);
			assert_non_null(strstr(cls, t[i].cls));
		}
	}
}

static void
test_special_needs_an_address_entry(void **state)
{
	struct policy p;
	char err[200], buf[200];
	const char *why;

	(void)state;
	memset(&p, 0, sizeof p);
	assert_int_equal(policy_add(&p, 0, "*", err, sizeof err), 0);
	assert_int_equal(policy_add(&p, 0, "localhost", err, sizeof err), 0);
	assert_int_equal(policy_check_addr(&p, sa("8.8.8.8"), 443, &why, buf,
	    sizeof buf), 0);
	assert_int_equal(policy_check_addr(&p, sa("127.0.0.1"), 80, &why, buf,
	    sizeof buf), -1);
	assert_non_null(strstr(why, "loopback"));
	assert_int_equal(policy_check_addr(&p, sa("169.254.169.254"), 80,
	    &why, buf, sizeof buf), -1);
	assert_int_equal(policy_add(&p, 0, "10.0.0.0/8", err, sizeof err), 0);
	assert_int_equal(policy_add(&p, 0, "[::1]:8080", err, sizeof err), 0);
	assert_int_equal(policy_check_addr(&p, sa("10.200.0.1"), 1, &why, buf,
	    sizeof buf), 0);
	assert_int_equal(policy_check_addr(&p, sa("11.0.0.1"), 1, &why, buf,
	    sizeof buf), 0);	/* public: "*" */
	assert_int_equal(policy_check_addr(&p, sa("::1"), 8080, &why, buf,
	    sizeof buf), 0);
	assert_int_equal(policy_check_addr(&p, sa("::1"), 8081, &why, buf,
	    sizeof buf), -1);
	assert_int_equal(policy_add(&p, 1, "10.1.0.0/16", err, sizeof err), 0);
	assert_int_equal(policy_check_addr(&p, sa("10.1.2.3"), 1, &why, buf,
	    sizeof buf), -1);
	assert_non_null(strstr(why, "--deny-host 10.1.0.0/16"));
	policy_describe(&p, buf, sizeof buf);
	assert_string_equal(buf, "allow: *, localhost, 10.0.0.0/8, "
	    "[::1]:8080; deny: 10.1.0.0/16");
	policy_free(&p);
	policy_describe(&p, buf, sizeof buf);
	assert_string_equal(buf, "allow: nothing");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entries_refused),
		cmocka_unit_test(test_names_ports_deny),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_special_needs_an_address_entry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
