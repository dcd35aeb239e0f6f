/* cl-window-describe.c - ClWindow's model runs: what the background worker reads (the pair shown
 * through its display, masks and alignment; the long history; the case's notes), the streamed
 * text and progress in the description panel, and the result: the text, its sentence maps, the
 * heat maps over the later image, the run recorded in the case. */
#include "cl-window-private.h"

#include <glib/gi18n.h>

#include "model/model.h"
#include "worker/worker.h"

gboolean cl_window_get_describing(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->describe_cancellable != NULL;
}

void cl_window_set_describing(ClWindow *self, GCancellable *cancellable)
{
    g_set_object(&self->describe_cancellable, cancellable);
    gboolean on = cancellable != NULL;
    gtk_widget_action_set_enabled(GTK_WIDGET(self), "win.stop-describe", on);
    cl_description_panel_set_running(self->description_panel, on);
    cl_window_cases_update_editor(self);
    cl_window_update_actions(self);
    g_object_notify(G_OBJECT(self), "describing");
}

char *cl_window_get_description(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), NULL);
    return cl_description_panel_get_text(self->description_panel);
}

guint cl_window_get_described_images(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), 0);
    return self->described_images;
}

typedef struct {
    ClWindow *self; /* weak */
    GCancellable *cancellable;
} DescribeRun;

static DescribeRun *describe_run_new(ClWindow *self, GCancellable *cancellable)
{
    DescribeRun *run = g_new0(DescribeRun, 1);
    g_set_weak_pointer(&run->self, self);
    run->cancellable = g_object_ref(cancellable);
    return run;
}

static void describe_run_free(gpointer data)
{
    DescribeRun *run = data;
    g_clear_weak_pointer(&run->self);
    g_clear_object(&run->cancellable);
    g_free(run);
}

/* The run's callbacks act only while it is the window's current one. */
static ClWindow *run_window(DescribeRun *run)
{
    return run->self && run->self->describe_cancellable == run->cancellable ? run->self : NULL;
}

static void on_describe_progress(const char *stage, double fraction, gpointer data)
{
    ClWindow *self = run_window(data);
    if (!self)
        return;
    cl_description_panel_set_stage(self->description_panel, stage);
    cl_description_panel_set_progress(self->description_panel, fraction);
}

static void on_describe_text(const char *text, gpointer data)
{
    ClWindow *self = run_window(data);
    if (self)
        cl_description_panel_append_text(self->description_panel, text);
}

static void describe_failed(ClWindow *self, const GError *error)
{
    /* the text streamed so far is not the reviewer's edit: never kept as a version */
    gtk_text_buffer_set_modified(cl_description_panel_get_buffer(self->description_panel), FALSE);
    gboolean cancelled = g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
    cl_description_panel_set_stage(self->description_panel, cancelled ? _("Stopped") : _("Failed"));
    if (!cancelled) {
        /* TRANSLATORS: the model run failed; %s says why */
        g_autofree char *text =
            g_strdup_printf(_("The model could not describe the change: %s"), error->message);
        cl_window_toast(self, text);
    }
}

/* The panel's lines about a finished run: its tokens, rate and device; the model, the case notes
 * it read, its notices. */
/* names joined with ", "; "none" (translated) for none */
static char *join_names(const GPtrArray *names)
{
    if (names->len == 0)
        return g_strdup(_("none"));
    g_autoptr(GString) s = g_string_new(NULL);
    for (guint i = 0; i < names->len; i++)
        g_string_append_printf(s, "%s%s", i ? ", " : "", (const char *)names->pdata[i]);
    return g_string_free(g_steal_pointer(&s), FALSE);
}

static void show_run_summary(ClWindow *self, const ClWorkerDescribeResult *r)
{
    /* TRANSLATORS: after a model run: tokens, their rate, the device */
    g_autofree char *stage = g_strdup_printf(_("Done: %u tokens at %.0f per second on the %s"),
                                             r->result.ids->len, r->result.tokens_per_s, r->device);
    cl_description_panel_set_stage(self->description_panel, stage);
    GString *model = g_string_new(NULL);
    /* TRANSLATORS: which model wrote the description */
    g_string_append_printf(model, _("Model: %s"), r->model_name);
    if (!r->model_path)
        g_string_append_printf(model, " — %s",
                               _("untrained: no model is installed, so this text is noise"));
    if (r->result.context_tokens > 0) {
        g_string_append_c(model, '\n');
        if (r->result.context_pages > 0)
            /* TRANSLATORS: the case's notes, read by the model as rendered pages */
            g_string_append_printf(model, _("Case notes read as %d pages (%d tokens)"),
                                   r->result.context_pages, r->result.context_tokens);
        else
            g_string_append_printf(model, _("Case notes read as text (%d tokens)"),
                                   r->result.context_tokens);
    }
    if (r->result.regions.n > 0) { /* what the heads found (docs/MODEL.md §3.13) */
        g_autoptr(GString) where = g_string_new(NULL);
        for (int i = 0; i < r->result.regions.n; i++)
            g_string_append_printf(where, "%s%s", i ? _(" and ") : "",
                                   cl_grounding_position_names[r->result.regions.cell[i]]);
        g_string_append_c(model, '\n');
        /* TRANSLATORS: where the model's change head found the change (3 × 3 position names) */
        g_string_append_printf(model, _("Change found at the %s"), where->str);
        if (r->result.object_name)
            /* TRANSLATORS: the object the model's object head sees there, and its confidence */
            g_string_append_printf(model, _("; the object there: %s (%.0f %%)"),
                                   r->result.object_name, 100 * r->result.object_share);
        if (r->result.findings_added && r->result.findings_missing &&
            (r->result.findings_added->len || r->result.findings_missing->len)) {
            g_autofree char *added = join_names(r->result.findings_added);
            g_autofree char *missing = join_names(r->result.findings_missing);
            g_string_append_c(model, '\n');
            /* TRANSLATORS: on a radiograph, the findings the model's object head sees appear
             * and disappear where the change is (names of findings, or "none") */
            g_string_append_printf(model, _("Findings seen added: %s; missing: %s"), added,
                                   missing);
        }
    }
    for (guint i = 0; r->result.notices && i < r->result.notices->len; i++)
        g_string_append_printf(model, "\n%s", (char *)r->result.notices->pdata[i]);
    if (r->notice)
        g_string_append_printf(model, "\n%s", r->notice);
    cl_description_panel_set_model(self->description_panel, model->str);
    g_string_free(model, TRUE);
}

/* The later image's maps (the last image read; the long history reads priors before). */
static void show_run_heat(ClWindow *self, const ClWorkerDescribeResult *r)
{
    self->described_images = r->result.n_images;
    const guint last = r->result.n_images - 1;
    if (!(r->result.heatmaps->len >= last && r->result.n_images >= 2)) {
        cl_compare_view_set_heatmap(self->compare_view, NULL, NULL, NULL, FALSE);
        return;
    }
    g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func((GDestroyNotify)cl_heatmap_free);
    for (guint i = 0; r->result.layer_heatmaps && i < r->result.layer_heatmaps->len; i++) {
        const ClHeatmap *lh = r->result.layer_heatmaps->pdata[i];
        if (lh->image_index == (int)last)
            g_ptr_array_add(layers, cl_heatmap_copy(lh));
    }
    /* an aligned input gives maps of the earlier image's frame */
    cl_compare_view_set_heatmap(
        self->compare_view, cl_heatmap_copy(r->result.heatmaps->pdata[last - 1]), layers,
        &r->result.letterbox[last], self->describe_aligned && self->aligned);
    if (!cl_window_get_show_heatmap(self))
        cl_window_set_show_heatmap(self, TRUE);
}

static void describe_done(GObject *source, GAsyncResult *result, gpointer data)
{
    DescribeRun *run = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(ClWorkerDescribeResult) r =
        cl_worker_describe_finish(CL_WORKER(source), result, &error);
    ClWindow *self = run_window(run);
    describe_run_free(run);
    if (!self)
        return; /* replaced by a newer run, or the window is gone */
    cl_window_set_describing(self, NULL);
    if (!r) {
        describe_failed(self, error);
        return;
    }
    /* the streamed text may have been coalesced; the result is the reference */
    g_autofree char *text = g_utf8_make_valid(r->result.text, -1);
    cl_description_panel_set_text(self->description_panel, text);
    show_run_summary(self, r);
    cl_description_panel_set_sentences(self->description_panel, r->sentences, text);
    show_run_heat(self, r);
    cl_window_cases_record_run(self, r);
    cl_window_update_actions(self);
}

static void release_document(gpointer doc)
{
    g_object_unref(doc);
}

/* The model file: the "model-file" setting, else the installed default, else none (the untrained
 * tiny model, said so in the panel). *owned keeps what the path points into. */
static void pick_model(ClWindow *self, ClWorkerModel *model, char **owned)
{
    g_autofree char *setting =
        self->settings ? g_settings_get_string(self->settings, "model-file") : NULL;
    if (setting && *setting)
        *owned = g_steal_pointer(&setting);
    else { /* photographs, radiographs and aerial tiles get their own models where there are
            (model/model.h) */
        ClDocument *doc = cl_image_view_get_document(cl_window_get_view(self, 0));
        *owned = cl_model_find_default_for(
            doc ? cl_describe_detect_domain(cl_document_get_image(doc)) : CL_CHAT_DOMAIN_GENERIC,
            NULL);
    }
    model->path = *owned;
    if (!model->path)
        model->random_preset = (char *)"tiny";
}

/* The case's notes, oldest first, as prior reports (the worker copies the text); NULL: none. */
static char *case_notes(ClWindow *self)
{
    if (!self->current_case || !self->current_case->notes || !self->current_case->notes->len ||
        (self->settings && !g_settings_get_boolean(self->settings, "read-case-notes")))
        return NULL;
    GString *ctx = g_string_new(NULL);
    for (guint i = 0; i < self->current_case->notes->len; i++) {
        const ClCaseNote *n = g_ptr_array_index(self->current_case->notes, i);
        if (n->text && *n->text)
            g_string_append_printf(ctx, "%s%s: %s", ctx->len ? "\n\n" : "",
                                   n->created_at ? n->created_at : "", n->text);
    }
    return g_string_free(ctx, FALSE);
}

/* The images the model reads: with the long history every earlier item of the sequence, then the
 * pair through the window/level on screen, masked, the later one aligned when it is on screen.
 * later_masks: the masks mapped onto the later image (kept by the caller until the call). */
static ClWorkerImage *run_images(ClWindow *self, gboolean history, const double *later_masks,
                                 guint *n)
{
    const guint n_prior = history ? self->pair_a : 0;
    ClWorkerImage *imgs = g_new0(ClWorkerImage, n_prior + 2);
    for (guint i = 0; i < n_prior; i++) {
        const SeqItem *it = &g_array_index(self->sequence, SeqItem, i);
        imgs[i] = (ClWorkerImage){ cl_document_get_image(it->doc),
                                   it->frame,
                                   g_object_ref(it->doc),
                                   release_document,
                                   NULL,
                                   0 };
    }
    ClWorkerImage *pair = imgs + n_prior;
    guint n_masks;
    const double *masks[2] = { cl_compare_view_get_masks(self->compare_view, &n_masks),
                               later_masks };
    for (guint i = 0; i < 2; i++) {
        ClImageView *view = cl_window_get_view(self, i);
        ClDocument *doc = cl_image_view_get_document(view);
        pair[i] = (ClWorkerImage){ cl_document_get_image(doc),
                                   cl_image_view_get_frame(view),
                                   g_object_ref(doc),
                                   release_document,
                                   masks[i],
                                   n_masks };
        pair[i].has_display = cl_image_view_get_display(view, &pair[i].display);
        /* Preferences can turn the aligned input off; the long history reads every image as it
         * is: one frame for all of them */
        if (i == 1 && self->aligned && !history &&
            (!self->settings || g_settings_get_boolean(self->settings, "align-model-input")) &&
            cl_image_view_get_alignment(view, pair[1].align)) {
            pair[1].has_align = TRUE;
            cl_image_view_get_image_size(cl_window_get_view(self, 0), &pair[1].frame_w,
                                         &pair[1].frame_h);
            pair[1].masks = masks[0]; /* in the frame's pixels, like the first image's */
        }
    }
    *n = n_prior + 2;
    return imgs;
}

static void ensure_worker(ClWindow *self)
{
    if (self->worker)
        return;
    const char *device = "auto";
    g_autofree char *dev = self->settings ? g_settings_get_string(self->settings, "device") : NULL;
    if (dev && *dev)
        device = dev;
    self->worker = cl_worker_new(device);
}

static void describe_now(ClWindow *self, gpointer data);

void cl_window_describe(ClWindow *self)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    if (!cl_image_view_get_document(cl_window_get_view(self, 0)) ||
        !cl_image_view_get_document(cl_window_get_view(self, 1)))
        return;
    /* the editor is cleared for the new text: an edit in it is saved or dropped as the reviewer
     * says, never filed without asking */
    cl_window_cases_confirm_unsaved_for(self, CL_UNSAVED_DESCRIBE, describe_now, NULL, NULL);
}

static void describe_now(ClWindow *self, gpointer data)
{
    if (!cl_image_view_get_document(cl_window_get_view(self, 0)) ||
        !cl_image_view_get_document(cl_window_get_view(self, 1)))
        return;
    if (self->describe_cancellable)
        g_cancellable_cancel(self->describe_cancellable);
    ensure_worker(self);
    ClWorkerModel model = { NULL, NULL, NULL, 0 };
    g_autofree char *model_path = NULL;
    pick_model(self, &model, &model_path);

    /* the long history (Preferences): every earlier item of the sequence before the pair, read
     * in order with the streaming cache (a sink and a window: any number of priors fits) */
    const gboolean history = self->settings && self->sequence &&
                             g_settings_get_boolean(self->settings, "long-history") &&
                             self->pair_a < self->pair_b && self->pair_b < self->sequence->len &&
                             self->pair_a > 0;
    /* the ignore regions apply to the model's input too: it sees nothing there */
    g_autofree double *later_masks = cl_compare_view_masks_for_later(self->compare_view);
    guint n_images;
    ClWorkerImage *imgs = run_images(self, history, later_masks, &n_images);
    ClDescribeOptions opts;
    cl_describe_options_init(&opts);
    if (self->settings) {
        g_autofree char *src = g_settings_get_string(self->settings, "heatmap-source");
        opts.delta = g_strcmp0(src, "delta") == 0;
        /* "auto": the model's best source (describe.h); "update-norm": the encoder updates */
        if (g_strcmp0(src, "update-norm") == 0)
            opts.heatmap_source = "update_norm";
    }
    self->describe_delta = opts.delta;
    self->describe_aligned = self->aligned && !history;
    self->describe_first = history ? 0 : self->pair_a;
    if (history) {
        opts.stream_sink = 256;
        opts.stream_window = 2048;
    }
    g_autofree char *notes = case_notes(self);
    opts.context = notes && *notes ? notes : NULL;
    opts.context_vist_only = TRUE; /* a model never trained on prior reports gets none */

    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    DescribeRun *run = describe_run_new(self, cancellable);
    cl_window_set_describing(self, cancellable);

    cl_description_panel_set_text(self->description_panel, "");
    cl_description_panel_set_stage(self->description_panel, _("Starting…"));
    cl_description_panel_set_model(self->description_panel, "");
    cl_description_panel_set_progress(self->description_panel, 0);
    gtk_revealer_set_reveal_child(self->panel_revealer, TRUE);

    /* the progress and text callbacks share the run with the result callback, which frees it
     * after the worker has dropped the callbacks (user_data_free runs before the result) */
    DescribeRun *cb_run = describe_run_new(self, cancellable);
    ClWorkerCallbacks cb = { on_describe_progress, on_describe_text, cb_run, describe_run_free };
    cl_worker_describe_async(self->worker, &model, imgs, n_images, &opts, &cb, cancellable,
                             describe_done, run);
    g_free(imgs);
}
