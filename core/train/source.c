/* source.c - the trainer's data source (trainer-private.h): a synthetic task mix, each sample
 * made from its stream seed with its task drawn from the run's RNG, or a ShareGPT JSONL file
 * read in one seeded permutation per epoch. */
#include <string.h>

#include "train/synthdata.h"
#include "train/trainer-private.h"

gboolean cl_trainer_parse_tasks(const char *spec, char ***out, int **images_out, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(spec, ",", -1);
    g_autoptr(GPtrArray) tasks = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GArray) counts = g_array_new(FALSE, FALSE, sizeof(int));
    const char *const *known = cl_synth_tasks();
    for (char **p = parts; *p; p++) {
        char *t = g_strstrip(*p);
        if (!*t)
            continue;
        int images = 0;
        /* TASK+changed: the task without its unchanged pairs (radiograph, aerial) */
        char *plus = strstr(t, "+changed");
        if (plus) {
            g_autofree char *base = g_strndup(t, (gsize)(plus - t));
            if ((strcmp(base, "radiograph") != 0 && strcmp(base, "aerial") != 0) ||
                (plus[8] && plus[8] != '~')) {
                FAIL(OPTIONS,
                     "'%s': +changed is for the tasks with unchanged pairs, radiograph "
                     "and aerial (aerial+changed, aerial+changed~2)",
                     t);
                return FALSE;
            }
        }
        char *tilde = strchr(t, '~');
        if (tilde) {
            /* TASK~L: the task with acquisition nuisances of level L (0 none, 1 mild, 2 strong) */
            if (tilde[1] < '0' || tilde[1] > '2' || tilde[2] || strchr(t, '@')) {
                FAIL(OPTIONS, "'%s': ~L takes a nuisance level 0, 1 or 2 (photo-edits~2)", t);
                return FALSE;
            }
            g_autofree char *base = g_strndup(t, (gsize)((plus ? plus : tilde) - t));
            if (!g_strv_contains(known, base)) {
                g_autofree char *list = g_strjoinv(", ", (char **)known);
                FAIL(OPTIONS, "unknown task '%s' (tasks: %s)", base, list);
                return FALSE;
            }
            g_ptr_array_add(tasks, g_strdup(t));
            g_array_append_val(counts, images);
            continue;
        }
        char *at = strchr(t, '@');
        if (at) {
            /* dots@K: the dots task with K images per sample, beside the mix's other entries */
            char *end = NULL;
            gint64 k = g_ascii_strtoll(at + 1, &end, 10);
            if (at - t != 4 || strncmp(t, "dots", 4) != 0 || !g_ascii_isdigit(at[1]) || *end ||
                k < 2 || k > 5) {
                FAIL(OPTIONS, "'%s': only the dots task takes @K, with K from 2 to 5 (dots@2)", t);
                return FALSE;
            }
            images = (int)k;
        }
        if (plus) {
            g_ptr_array_add(tasks, g_strdup(t));
            g_array_append_val(counts, images);
            continue;
        }
        if (!images && !g_strv_contains(known, t)) {
            g_autofree char *list = g_strjoinv(", ", (char **)known);
            FAIL(OPTIONS, "unknown task '%s' (tasks: %s; dots@K for K images)", t, list);
            return FALSE;
        }
        g_ptr_array_add(tasks, g_strdup(t));
        g_array_append_val(counts, images);
    }
    if (tasks->len == 0) {
        FAIL(OPTIONS, "--task names no task");
        return FALSE;
    }
    g_ptr_array_add(tasks, NULL);
    *out = (char **)g_ptr_array_steal(tasks, NULL);
    if (images_out)
        *images_out = (int *)(void *)g_array_free(g_steal_pointer(&counts), FALSE);
    return TRUE;
}

void cl_trainer_source_clear(ClTrainerSource *s)
{
    g_strfreev(s->tasks);
    g_free(s->task_images);
    g_clear_pointer(&s->ds, cl_dataset_free);
    g_free(s->order);
    memset(s, 0, sizeof(*s));
}

static guint64 splitmix64(guint64 *state)
{
    guint64 z = (*state += G_GUINT64_CONSTANT(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* The next sample of the stream: advances *cursor (and *rng for a task mix). */
void cl_trainer_source_next(ClTrainerSource *s, guint64 *cursor, guint64 *rng,
                            ClTrainerSampleRef *ref)
{
    ref->index = (*cursor)++;
    if (s->ds) {
        guint n = cl_dataset_count(s->ds);
        guint64 epoch = ref->index / n;
        if (epoch != s->order_epoch) {
            cl_dataset_epoch_order(s->order, n, s->seed, epoch);
            s->order_epoch = epoch;
        }
        ref->item = s->order[ref->index % n];
        return;
    }
    /* the task of each sample is drawn (always, so a mix of one behaves like any other) */
    guint64 r = splitmix64(rng) >> 11;
    ref->task = MIN((int)((double)r * 0x1p-53 * s->n_tasks), s->n_tasks - 1);
    ref->seed = cl_synth_stream_seed(s->seed, ref->index);
}

ClTrainSample *cl_trainer_source_get(ClTrainerSource *s, const ClModel *model,
                                     const ClTrainerSampleRef *ref, gboolean all_turns,
                                     GError **error)
{
    if (s->ds)
        return cl_dataset_get(s->ds, ref->item, error);
    g_autoptr(GError) err = NULL;
    const char *task = s->tasks[ref->task];
    ClSynthOptions so = s->synth;
    /* --images is the dots task's; the rest of a mix draws its own; dots@K has its own K */
    if (s->task_images[ref->task]) {
        so.n_images = s->task_images[ref->task];
        task = "dots";
    } else if (strcmp(task, "dots") != 0) {
        so.n_images = 0;
    }
    g_autofree char *base = NULL;
    const char *tilde = strchr(task, '~'); /* TASK~L: its nuisance level */
    if (tilde)
        so.nuisance_level = tilde[1] - '0';
    const char *plus = strstr(task, "+changed"); /* TASK+changed: no unchanged pairs */
    so.changed_only = plus != NULL;
    if (tilde || plus)
        task = base = g_strndup(task, (gsize)((plus ? plus : tilde) - task));
    g_autoptr(ClSynthSample) syn = cl_synth_generate(task, ref->seed, &so, &err);
    ClTrainSample *ts = syn ? cl_train_sample_from_synth(model, syn, all_turns, &err) : NULL;
    if (!ts)
        g_set_error(error, CL_TRAINER_ERROR, CL_TRAINER_ERROR_SAMPLE,
                    "%s sample %" G_GUINT64_FORMAT " (seed %" G_GUINT64_FORMAT "): %s", task,
                    ref->index, ref->seed, err->message);
    return ts;
}

/* Opens the task mix or the data file (see trainer-private.h). */
gboolean cl_trainer_source_open(ClTrainerSource *s, const ClTrainerOptions *o, const ClModel *model,
                                GError **error)
{
    memset(s, 0, sizeof(*s));
    s->seed = o->seed;
    s->order_epoch = G_MAXUINT64;
    if (o->data) {
        ClDatasetOptions dopt;
        cl_dataset_options_init(&dopt);
        dopt.all_turns = o->all_turns;
        dopt.image_cache = 512;
        s->ds = cl_dataset_open(o->data, model, &dopt, error);
        if (!s->ds)
            return FALSE;
        s->order = g_new(guint, cl_dataset_count(s->ds));
        return TRUE;
    }
    if (!cl_trainer_parse_tasks(o->task, &s->tasks, &s->task_images, error))
        return FALSE;
    s->n_tasks = (int)g_strv_length(s->tasks);
    cl_synth_options_for_model(&s->synth, model);
    s->synth.min_objects = o->min_objects;
    s->synth.max_objects = o->max_objects;
    if (o->dot_scale > 0)
        s->synth.dot_scale = o->dot_scale;
    s->synth.n_images = o->dot_images;
    return TRUE;
}
