/*
 * http_lib.c - libcurl, loaded when the model client first needs it (see
 * http.h, http_load): an agent run's. `agentz exec`, `agentz ctl`,
 * --version and the rest never map it, nor the forty libraries it pulls
 * in (TLS, Kerberos, LDAP, SSH, ...) whose loading and constructors took
 * about 15 ms of every start.
 *
 * The table's types are checked against <curl/curl.h> at compile time,
 * so a pointer can only be called as the header declares the function.
 */
#include "supervisor/model/http_int.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* libcurl's ABI since 7.16 (2006): the name the runtime package ships */
#define HTTP_LIB_SONAME "libcurl.so.4"

struct http_lib http_lib;

#define SYM(f) { "curl_" #f, offsetof(struct http_lib, f) }
#define SAME(f) _Static_assert(__builtin_types_compatible_p( \
	__typeof__(&curl_##f), __typeof__(http_lib.f)), "curl_" #f)

SAME(easy_init); SAME(easy_cleanup); SAME(easy_setopt); SAME(easy_getinfo);
SAME(easy_strerror); SAME(multi_init); SAME(multi_cleanup);
SAME(multi_setopt); SAME(multi_add_handle); SAME(multi_remove_handle);
SAME(multi_socket_action); SAME(multi_info_read); SAME(multi_strerror);
SAME(slist_append); SAME(slist_free_all); SAME(url); SAME(url_set);
SAME(url_get); SAME(url_cleanup); SAME(url_strerror); SAME(free);
SAME(getdate); SAME(global_init);

static const struct {
	const char *name;
	size_t off;
} syms[] = {
	SYM(easy_init), SYM(easy_cleanup), SYM(easy_setopt),
	SYM(easy_getinfo), SYM(easy_strerror), SYM(multi_init),
	SYM(multi_cleanup), SYM(multi_setopt), SYM(multi_add_handle),
	SYM(multi_remove_handle), SYM(multi_socket_action),
	SYM(multi_info_read), SYM(multi_strerror), SYM(slist_append),
	SYM(slist_free_all), SYM(url), SYM(url_set), SYM(url_get),
	SYM(url_cleanup), SYM(url_strerror), SYM(free), SYM(getdate),
	SYM(global_init),
};

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
    "dlsym's pointers are function pointers (POSIX)");

int
http_load(char *err, size_t len)
{
	static int state;	/* 0 not tried, 1 loaded, -1 failed */
	static char why[300];
	const char *e;
	void *lib, *p;
	size_t i;

	if (state == 0) {
		state = -1;
		lib = dlopen(HTTP_LIB_SONAME, RTLD_NOW | RTLD_LOCAL);
		for (i = 0; lib != NULL && i < sizeof syms / sizeof *syms;
		    i++) {
			if ((p = dlsym(lib, syms[i].name)) == NULL)
				break;
			memcpy((char *)&http_lib + syms[i].off, &p, sizeof p);
		}
		if (lib == NULL || i < sizeof syms / sizeof *syms) {
			e = dlerror();
			(void)snprintf(why, sizeof why, "cannot load %s, the "
			    "model client's HTTP library (Debian package "
			    "libcurl4): %s", HTTP_LIB_SONAME, e != NULL ? e :
			    "unknown error");
		} else if (http_lib.global_init(CURL_GLOBAL_DEFAULT) !=
		    CURLE_OK) {
			(void)snprintf(why, sizeof why, "%s: "
			    "curl_global_init failed", HTTP_LIB_SONAME);
		} else {
			state = 1;
		}
	}
	if (state < 0 && err != NULL && len > 0)
		(void)snprintf(err, len, "%s", why);
	return state > 0 ? 0 : -1;
}
