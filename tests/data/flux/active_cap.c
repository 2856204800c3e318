/* A jobtap plugin for the tests: refuses a job while `cap` jobs are active, with
 * flux-accounting's words ("user has max active jobs"), as its mf_priority.so does
 * past a bank's max_active_jobs.  flux-accounting is not available here; this makes
 * the same refusal in a real instance.  Load: flux jobtap load active_cap.so cap=N
 */
#include <flux/core.h>
#include <flux/jobtap.h>

static int cap = 8;
static int active = 0;

static int validate_cb (flux_plugin_t *p,
                        const char *topic,
                        flux_plugin_arg_t *args,
                        void *arg)
{
    if (active >= cap)
        return flux_jobtap_reject_job (p, args, "user has max active jobs");
    active++; /* counted when accepted: a batch is validated before any job.new */
    return 0;
}

static int inactive_cb (flux_plugin_t *p,
                        const char *topic,
                        flux_plugin_arg_t *args,
                        void *arg)
{
    if (active > 0)
        active--;
    return 0;
}

static const struct flux_plugin_handler tab[] = {
    { "job.validate", validate_cb, NULL },
    { "job.state.inactive", inactive_cb, NULL },
    { 0 },
};

int flux_plugin_init (flux_plugin_t *p)
{
    if (flux_plugin_conf_unpack (p, "{s:i}", "cap", &cap) < 0)
        cap = 8;
    return flux_plugin_register (p, "active-cap", tab);
}
