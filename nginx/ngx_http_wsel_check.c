/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_check.c -- the checks that need the whole configuration:
 * no other balancer in wsel's place, each policy
 * loadable by the `user` the workers run as, wsel_sync only with a
 * libwsel-router that has NATS. They run in a core module's
 * init_conf (ngx_wsel_check_module, built into the same .so), which nginx
 * calls once every directive is read, worker_processes and user included
 * wherever they stand: a failure there refuses the configuration (nginx
 * -t fails, a reload keeps the old workers), where one in init_module
 * would make the master exit.
 */

#include "ngx_http_wsel_module.h"

#include <grp.h>
#include <sys/wait.h>


static char *ngx_wsel_check_init_conf(ngx_cycle_t *cycle, void *conf);


static ngx_core_module_t  ngx_wsel_check_module_ctx = {
    ngx_string("wsel_check"),
    NULL,                                  /* create configuration */
    ngx_wsel_check_init_conf               /* init configuration */
};


ngx_module_t  ngx_wsel_check_module = {
    NGX_MODULE_V1,
    &ngx_wsel_check_module_ctx,            /* module context */
    NULL,                                  /* module directives */
    NGX_CORE_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    NULL,                                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


int32_t
ngx_http_wsel_try_policy(ngx_http_wsel_upstream_t *up, char *err, size_t size)
{
    int32_t            rc;
    wsel_host         *host;
    wsel_host_options  o;

    ngx_http_wsel_host_options(up, &o);
    err[0] = '\0';

    rc = wsel_host_create(&o, &host);
    if (rc == 0) {
        rc = wsel_host_switch(host, (const char *) up->policy.data,
                              (const char *) up->config.data, err, size);
        wsel_host_destroy(host);
    }

    if (rc != 0 && err[0] == '\0') {
        ngx_cpystrn((u_char *) err, (u_char *) wsel_strerror(rc), size);
    }

    return rc;
}


/* In a child: become the workers' user as nginx's worker does (group,
 * supplementary groups, user), try the policy, write why it failed. */
static void
ngx_wsel_check_child(ngx_core_conf_t *ccf, ngx_http_wsel_upstream_t *up,
    int fd)
{
    char     err[NGX_HTTP_WSEL_ERR];
    ssize_t  n;

    if (setgid(ccf->group) == -1
        || initgroups(ccf->username, ccf->group) == -1
        || setuid(ccf->user) == -1)
    {
        ngx_snprintf((u_char *) err, sizeof(err) - 1, "cannot become it: %s%Z",
                     strerror(errno));

    } else if (ngx_http_wsel_try_policy(up, err, sizeof(err)) == 0) {
        _exit(0);
    }

    n = write(fd, err, ngx_strlen(err));
    _exit(n >= 0 ? 1 : 2);
}


/* The policy as the workers will load it: a child of the master (one
 * thread at configuration time) drops to their user and tries it. */
static ngx_int_t
ngx_wsel_check_as_user(ngx_cycle_t *cycle, ngx_core_conf_t *ccf,
    ngx_http_wsel_upstream_t *up)
{
    int        fds[2], status;
    char       err[NGX_HTTP_WSEL_ERR];
    pid_t      pid;
    size_t     len;
    ssize_t    n;

    if (pipe(fds) == -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "wsel: pipe() failed");
        return NGX_ERROR;
    }

    pid = fork();

    if (pid == 0) {
        close(fds[0]);
        ngx_wsel_check_child(ccf, up, fds[1]);
    }

    close(fds[1]);
    len = 0;

    while (pid > 0 && len < sizeof(err) - 1) {
        n = read(fds[0], err + len, sizeof(err) - 1 - len);
        if (n > 0) {
            len += n;

        } else if (n == 0 || errno != EINTR) {
            break;
        }
    }

    close(fds[0]);
    err[len] = '\0';

    if (pid == -1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "wsel: fork() failed");
        return NGX_ERROR;
    }

    while (waitpid(pid, &status, 0) == -1 && errno == EINTR) { /* void */ }

    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        return NGX_OK;
    }

    ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                  "wsel: upstream \"%V\": policy \"%V\" (wsel_policy in "
                  "%V:%ui) refused as user \"%s\", whom the worker "
                  "processes run as: %s", &up->name, &up->policy,
                  &up->policy_file, up->policy_line, ccf->username,
                  len ? err : "the check ended abnormally");

    return NGX_ERROR;
}


/* wsel_sync needs a libwsel-router built with libnats: the one loaded
 * now is the one the workers will run. */
static ngx_int_t
ngx_wsel_check_sync(ngx_cycle_t *cycle, ngx_http_wsel_upstream_t *up)
{
    if (up->sync.url.len == 0 || wsel_router_sync_available()) {
        return NGX_OK;
    }

    ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                  "wsel: upstream \"%V\": wsel_sync in %V:%ui needs "
                  "libwsel-router built with libnats (Debian's libnats-dev), "
                  "and this one was built without it: rebuild wsel with "
                  "libnats-dev installed, or remove wsel_sync",
                  &up->name, &up->sync.file, up->sync.line);

    return NGX_ERROR;
}


static ngx_int_t
ngx_wsel_check_upstream(ngx_cycle_t *cycle, ngx_core_conf_t *ccf,
    ngx_http_wsel_upstream_t *up)
{
    if (ngx_wsel_check_sync(cycle, up) != NGX_OK) {
        return NGX_ERROR;
    }

    if (up->peer_names == NULL) {
        /* its init_upstream never ran: another balancer (least_conn,
         * hash, ...) given after wsel_policy replaced it, and the routed
         * choice and rank header would go to whatever server that one
         * picks */
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "wsel: upstream \"%V\": another load balancing method "
                      "given after wsel_policy replaced it; remove it "
                      "(keepalive is the one that may follow)", &up->name);
        return NGX_ERROR;
    }

    /* the master (root) loaded the policy at the upstream's end; a worker
     * running as another user may not be able to */
    if (up->policy.len && geteuid() == 0
        && ccf->user != (ngx_uid_t) NGX_CONF_UNSET_UINT && ccf->user != 0)
    {
        return ngx_wsel_check_as_user(cycle, ccf, up);
    }

    return NGX_OK;
}


static char *
ngx_wsel_check_init_conf(ngx_cycle_t *cycle, void *conf)
{
    ngx_uint_t                  i;
    ngx_core_conf_t            *ccf;
    ngx_http_wsel_upstream_t  **ups;
    ngx_http_wsel_main_conf_t  *wmcf;

    wmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_upstream_wsel_module);
    if (wmcf == NULL || wmcf->upstreams.nelts == 0) {
        return NGX_CONF_OK;
    }

    ccf = (ngx_core_conf_t *) ngx_get_conf(cycle->conf_ctx, ngx_core_module);
    ups = wmcf->upstreams.elts;

    for (i = 0; i < wmcf->upstreams.nelts; i++) {
        if (ngx_wsel_check_upstream(cycle, ccf, ups[i]) != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }

    (void) conf;
    return NGX_CONF_OK;
}
