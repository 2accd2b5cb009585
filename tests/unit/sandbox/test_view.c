/*
 * test_view.c - sandbox/view.c's plan of the minimal view: an empty root
 * holding only what the interpreter needs of the host, read-only, the
 * workspace, the binds and the masks inside them (issue 20, item 1). The
 * plan is only looked at; nothing is mounted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/jail.h"
#include "sandbox/view.h"

static struct plan *
plan_of(const struct jail_config *c)
{
	struct plan *p = view_plan_new();

	assert_non_null(p);
	p->wuid = 1900000007;
	p->wgid = 1900000007;
	assert_int_equal(view_plan(p, c, 0), 0);
	return p;
}

static const struct op *
find(const struct plan *p, enum op_kind k, const char *path)
{
	int i;

	for (i = 0; i < p->n; i++)
		if (p->op[i].kind == k && strcmp(p->op[i].path, path) == 0)
			return &p->op[i];
	return NULL;
}

static void
test_root_is_empty_and_read_only(void **state)
{
	struct jail_config c = { .mode = JAIL_REQUIRED, .workspace = "/tmp/ws",
	    .tmp_size = 1 << 20 };
	struct plan *p = plan_of(&c);
	struct stat st;
	int i;

	(void)state;
	/* the first op: a tmpfs as the root; the last: it made read-only */
	assert_int_equal(p->op[0].kind, OP_TMPFS);
	assert_string_equal(p->op[0].path, "/");
	assert_int_equal(p->op[p->n - 1].kind, OP_SET_RO);
	assert_string_equal(p->op[p->n - 1].path, "/");
	/* nothing binds the host's root, /home, /root, /var, /run, /sys */
	for (i = 0; i < p->n; i++) {
		const char *s = p->op[i].src, *v = p->op[i].path;

		if (s != NULL)
			assert_string_not_equal(s, "/oldroot");
		assert_false(strncmp(v, "/home", 5) == 0 ||
		    strncmp(v, "/root", 5) == 0 || strncmp(v, "/var", 4) == 0 ||
		    strncmp(v, "/run", 4) == 0 || strncmp(v, "/sys", 4) == 0);
	}
	assert_non_null(find(p, OP_RBIND, "/usr"));
	assert_non_null(find(p, OP_RDONLY_TREE, "/usr"));
	assert_non_null(find(p, OP_PROC, "/proc"));
	assert_non_null(find(p, OP_TMPFS, "/tmp"));
	assert_non_null(find(p, OP_BIND, "/tmp/ws"));
	/* a merged /usr's links are made again as links */
	if (lstat("/bin", &st) == 0 && S_ISLNK(st.st_mode))
		assert_non_null(find(p, OP_SYMLINK, "/bin"));
	/* /etc: ld.so.cache taken, shadow not */
	if (access("/etc/ld.so.cache", F_OK) == 0)
		assert_non_null(find(p, OP_BIND_RO, "/etc/ld.so.cache"));
	assert_null(find(p, OP_BIND_RO, "/etc/shadow"));
	assert_null(find(p, OP_MKFILE, "/etc/shadow"));
	view_plan_free(p);
}

/* Every line of text names id 0 or id in field 2. */
static void
only_ids(const char *text, unsigned long id)
{
	const char *l = text, *f;
	unsigned long v;
	int n = 0;

	for (; *l != '\0'; l = strchr(l, '\n') + 1, n++) {
		f = strchr(l, ':');
		assert_non_null(f);
		f = strchr(f + 1, ':');
		assert_non_null(f);
		v = strtoul(f + 1, NULL, 10);
		assert_true(v == 0 || v == id);
		assert_non_null(strchr(l, '\n'));
	}
	assert_true(n >= 1);
}

static void
test_passwd_and_group_name_root_and_the_worker(void **state)
{
	struct jail_config c = { .mode = JAIL_REQUIRED, .workspace = "/tmp/ws",
	    .tmp_size = 1 << 20 };
	struct plan *p = plan_of(&c);
	const struct op *pw = find(p, OP_WRITE, "/etc/passwd");
	const struct op *gr = find(p, OP_WRITE, "/etc/group");

	(void)state;
	assert_non_null(pw);
	assert_non_null(gr);
	only_ids(pw->data, 1900000007);
	only_ids(gr->data, 1900000007);
	assert_non_null(strstr(pw->data, ":1900000007:1900000007:"));
	assert_non_null(strstr(gr->data, ":1900000007:\n"));
	view_plan_free(p);
}

static void
test_binds_and_masks_inside_them(void **state)
{
	static const char *const masks[] = { "/usr/share/common-licenses",
	    NULL };
	struct jail_bind b[] = {
		{ "/usr/share", "/data/share", 0 },
		{ "/usr/lib", "/data/lib", 1 },
	};
	struct jail_config c = { .mode = JAIL_REQUIRED, .workspace = "/tmp/ws",
	    .tmp_size = 1 << 20, .masks = masks, .binds = b, .nbinds = 2 };
	struct plan *p = plan_of(&c);
	struct stat st;

	(void)state;
	assert_non_null(find(p, OP_RBIND, "/data/share"));
	assert_non_null(find(p, OP_RDONLY_TREE, "/data/share"));
	assert_non_null(find(p, OP_BIND, "/data/lib"));
	assert_non_null(find(p, OP_NOSUID, "/data/lib"));
	assert_null(find(p, OP_RDONLY_TREE, "/data/lib"));
	if (stat(masks[0], &st) == 0) {
		/* the mask at the host's path and where the bind shows it */
		assert_non_null(find(p, OP_MASK_DIR, masks[0]));
		assert_non_null(find(p, OP_MASK_DIR,
		    "/data/share/common-licenses"));
	}
	view_plan_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root_is_empty_and_read_only),
		cmocka_unit_test(test_passwd_and_group_name_root_and_the_worker),
		cmocka_unit_test(test_binds_and_masks_inside_them),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
