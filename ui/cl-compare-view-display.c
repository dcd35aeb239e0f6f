/* cl-compare-view-display.c - ClCompareView's captions (name, format and size; the pixel under
 * the pointer), linked window/level, and the window/level presets menu and its presets. */
#include "cl-compare-view-private.h"

#include <glib/gi18n.h>
#include <math.h>

#include "cl-document.h"
#include "image/display.h"

/* ---- captions and the pointer readout ---- */

static char *describe_frame(ClDocument *doc, guint frame)
{
    const ClImage *img = cl_document_get_image(doc);
    /* TRANSLATORS: image size in pixels, width × height */
    g_autofree char *size = g_strdup_printf(_("%u × %u px"), img->width, img->height);
    guint n = cl_document_get_n_frames(doc);
    if (n > 1) {
        /* TRANSLATORS: format, size, and which frame of a multi-frame file is shown */
        return g_strdup_printf(_("%s · %s · frame %u of %u"), cl_image_format_name(img->format),
                               size, frame + 1, n);
    }
    return g_strdup_printf("%s · %s", cl_image_format_name(img->format), size);
}

static void set_caption(GtkLabel *name, GtkLabel *info, ClDocument *doc, guint frame)
{
    if (!doc) {
        gtk_label_set_label(name, _("No second image"));
        gtk_label_set_label(info, _("Open another image to compare"));
        return;
    }
    g_autofree char *text = describe_frame(doc, frame);
    gtk_label_set_label(name, cl_document_get_name(doc));
    gtk_label_set_label(info, text);
}

static void on_view_motion(GtkEventControllerMotion *m, double wx, double wy, ClCompareView *self)
{
    ClImageView *view = CL_IMAGE_VIEW(gtk_event_controller_get_widget(GTK_EVENT_CONTROLLER(m)));
    GtkLabel *info = view == self->view_a ? self->info_a : self->info_b;
    ClDocument *doc = cl_image_view_get_document(view);
    if (!doc)
        return;
    double x, y;
    cl_image_view_widget_to_image(view, wx, wy, &x, &y);
    g_autofree char *text =
        cl_display_pixel_readout(cl_document_get_image(doc), cl_image_view_get_frame(view), x, y);
    if (!text)
        text = describe_frame(doc, cl_image_view_get_frame(view));
    gtk_label_set_label(info, text);
}

static void on_view_leave(GtkEventControllerMotion *m, ClCompareView *self)
{
    ClImageView *view = CL_IMAGE_VIEW(gtk_event_controller_get_widget(GTK_EVENT_CONTROLLER(m)));
    ClDocument *doc = cl_image_view_get_document(view);
    if (doc) {
        g_autofree char *text = describe_frame(doc, cl_image_view_get_frame(view));
        gtk_label_set_label(view == self->view_a ? self->info_a : self->info_b, text);
    }
}

/* ---- window/level ---- */

/* Linked views follow a window/level drag in either (each keeps its bands and inversion). */
static void on_display_changed(ClImageView *view, ClCompareView *self)
{
    if (!self->link_views || !self->sync_window_level)
        return;
    ClImageView *other = view == self->view_a ? self->view_b : self->view_a;
    ClDisplaySettings src, dst;
    if (!cl_image_view_get_display(view, &src) || !cl_image_view_get_display(other, &dst))
        return;
    dst.mode = CL_DISPLAY_WINDOW;
    dst.center = src.center;
    dst.width = src.width;
    cl_image_view_set_display(other, &dst);
}

/* "bands:R,G,B" (1-based band numbers; one number: that band in grey) into s; FALSE when the
 * image lacks one of them (it keeps its display). */
static gboolean preset_bands(ClDisplaySettings *s, const ClImage *img, const char *list)
{
    g_auto(GStrv) parts = g_strsplit(list, ",", 3);
    guint np = g_strv_length(parts);
    for (int k = 0; k < 3; k++) {
        guint64 b = g_ascii_strtoull(parts[np == 3 ? k : 0], NULL, 10);
        if (b < 1 || b > img->channels)
            return FALSE;
        s->bands[k] = (int)b - 1;
    }
    if (s->mode == CL_DISPLAY_FULL_RANGE || s->mode == CL_DISPLAY_WINDOW)
        s->mode = CL_DISPLAY_PERCENTILE, s->low_pct = 2, s->high_pct = 98;
    return TRUE;
}

static void apply_preset(ClImageView *view, const char *preset)
{
    ClDocument *doc = cl_image_view_get_document(view);
    if (!doc)
        return;
    const ClImage *img = cl_document_get_image(doc);
    guint frame = cl_image_view_get_frame(view);
    ClDisplaySettings s;
    cl_display_settings_init(&s, img, frame);
    static const struct {
        const char *name;
        double center, width;
    } ct[] = { { "ct:soft-tissue", 40, 400 },
               { "ct:lung", -600, 1500 },
               { "ct:bone", 400, 1800 },
               { "ct:brain", 40, 80 } };
    if (g_str_equal(preset, "minmax")) {
        s.mode = CL_DISPLAY_MINMAX;
    } else if (g_str_equal(preset, "percentile")) {
        s.mode = CL_DISPLAY_PERCENTILE;
        s.low_pct = 2, s.high_pct = 98;
    } else if (g_str_has_prefix(preset, "bands:")) {
        if (!preset_bands(&s, img, preset + 6))
            return;
    } else if (g_str_has_prefix(preset, "window:")) {
        /* "window:CENTRE:WIDTH" in modality units, as typed (Custom Window…) */
        char *end = NULL;
        const double c = g_ascii_strtod(preset + 7, &end);
        const double w = end && *end == ':' ? g_ascii_strtod(end + 1, &end) : NAN;
        if (!isfinite(c) || !isfinite(w) || w <= 0 || !end || *end)
            return;
        s.mode = CL_DISPLAY_WINDOW, s.center = c, s.width = w;
    } else if (g_str_has_prefix(preset, "file:")) {
        guint i = (guint)g_ascii_strtoull(preset + 5, NULL, 10);
        if (img->windows && i < img->windows->len) {
            const ClWindowPreset *w = &g_array_index(img->windows, ClWindowPreset, i);
            s.mode = CL_DISPLAY_WINDOW, s.center = w->center, s.width = w->width;
        }
    } else {
        for (guint i = 0; i < G_N_ELEMENTS(ct); i++)
            if (g_str_equal(preset, ct[i].name))
                s.mode = CL_DISPLAY_WINDOW, s.center = ct[i].center, s.width = ct[i].width;
    }
    cl_image_view_set_display(view, &s);
}

void cl_compare_view_apply_preset(ClCompareView *self, const char *preset)
{
    g_return_if_fail(CL_IS_COMPARE_VIEW(self));
    apply_preset(self->view_a, preset);
    apply_preset(self->view_b, preset);
}

/* The bands section for a multi-band image (remote sensing): which band goes to red, green and
 * blue. */
static GMenu *bands_menu(const ClImage *img)
{
    GMenu *bands = g_menu_new();
    g_menu_append(bands, _("Bands 1, 2, 3 as red, green, blue"),
                  "win.display-preset('bands:1,2,3')");
    g_menu_append(bands, _("Bands 3, 2, 1 as red, green, blue"),
                  "win.display-preset('bands:3,2,1')");
    if (img->channels >= 4) {
        /* TRANSLATORS: a false-colour composite of multispectral bands */
        g_menu_append(bands, _("Bands 4, 3, 2 (false colour)"),
                      "win.display-preset('bands:4,3,2')");
    }
    for (guint b = 1; b <= MIN(img->channels, 12u); b++) {
        /* TRANSLATORS: one band of a multi-band image shown in grey */
        g_autofree char *label = g_strdup_printf(_("Band %u alone"), b);
        g_autofree char *action = g_strdup_printf("win.display-preset('bands:%u')", b);
        g_menu_append(bands, label, action);
    }
    return bands;
}

/* The presets menu for the shown images: the stretches, the first image's own windows (DICOM),
 * its bands, the usual CT windows for CT. */
void cl_compare_view_update_presets(ClCompareView *self, ClDocument *doc)
{
    GMenu *menu = g_menu_new();
    GMenu *stretch = g_menu_new();
    g_menu_append(stretch, _("Default"), "win.display-preset('default')");
    g_menu_append(stretch, _("Minimum to maximum"), "win.display-preset('minmax')");
    g_menu_append(stretch, _("2 to 98 percentile"), "win.display-preset('percentile')");
    g_menu_append(stretch, _("Custom Window…"), "win.custom-window");
    g_menu_append_section(menu, NULL, G_MENU_MODEL(stretch));
    g_object_unref(stretch);
    /* whose values a stretch is taken over: identical values show alike only when shared */
    GMenu *across = g_menu_new();
    g_menu_append(across, _("From both images"), "view.stretch::shared");
    g_menu_append(across, _("From the earlier image"), "view.stretch::earlier");
    g_menu_append(across, _("From the later image"), "view.stretch::later");
    g_menu_append(across, _("Each image on its own"), "view.stretch::each");
    /* TRANSLATORS: menu section: where a contrast stretch of two images comes from */
    g_menu_append_section(menu, _("Stretch Across the Images"), G_MENU_MODEL(across));
    g_object_unref(across);
    const ClImage *img = doc ? cl_document_get_image(doc) : NULL;
    if (img && img->windows && img->windows->len > 0) {
        GMenu *file = g_menu_new();
        for (guint i = 0; i < img->windows->len && i < 16; i++) {
            const ClWindowPreset *w = &g_array_index(img->windows, ClWindowPreset, i);
            /* TRANSLATORS: a window preset from the DICOM file: its name, centre and width */
            g_autofree char *label =
                g_strdup_printf(_("%s (centre %g, width %g)"),
                                w->explanation ? w->explanation : _("File"), w->center, w->width);
            g_autofree char *action = g_strdup_printf("win.display-preset('file:%u')", i);
            g_menu_append(file, label, action);
        }
        g_menu_append_section(menu, _("From the file"), G_MENU_MODEL(file));
        g_object_unref(file);
    }
    if (img && img->channels >= 3 && img->layout == CL_LAYOUT_BANDS) {
        GMenu *bands = bands_menu(img);
        g_menu_append_section(menu, _("Bands"), G_MENU_MODEL(bands));
        g_object_unref(bands);
    }
    if (img && g_strcmp0(img->modality, "CT") == 0) {
        GMenu *ct = g_menu_new();
        g_menu_append(ct, _("Soft tissue"), "win.display-preset('ct:soft-tissue')");
        g_menu_append(ct, _("Lung"), "win.display-preset('ct:lung')");
        g_menu_append(ct, _("Bone"), "win.display-preset('ct:bone')");
        g_menu_append(ct, _("Brain"), "win.display-preset('ct:brain')");
        g_menu_append_section(menu, "CT", G_MENU_MODEL(ct));
        g_object_unref(ct);
    }
    gtk_menu_button_set_menu_model(self->preset_button, G_MENU_MODEL(menu));
    g_object_unref(menu);
}

void cl_compare_view_set_captions(ClCompareView *self, ClDocument *const docs[2],
                                  const guint frames[2])
{
    set_caption(self->name_a, self->info_a, docs[0], frames[0]);
    set_caption(self->name_b, self->info_b, docs[1], frames[1]);
}

void cl_compare_view_display_class_init(GtkWidgetClass *widget_class)
{
    gtk_widget_class_bind_template_callback(widget_class, on_display_changed);
    gtk_widget_class_bind_template_callback(widget_class, on_view_motion);
    gtk_widget_class_bind_template_callback(widget_class, on_view_leave);
}
