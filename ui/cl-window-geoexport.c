/* cl-window-geoexport.c - the change map of the case shown, for GIS: the heat map as a Float32
 * GeoTIFF on its image's own grid (size, CRS and geotransform of the file), its mask at heat 0.5 as
 * a Byte GeoTIFF, and the mask's changed regions as a GeoPackage of polygons with their areas
 * (core/image/geoexport.h), written in a thread; a toast says what was written. */
#include "cl-window-private.h"

#include <glib/gi18n.h>
#include <string.h>

#include "image/geoexport.h"
#include "model/heatmap.h"

#define MASK_THRESHOLD 0.5

typedef struct {
    ClWindow *self; /* weak */
    ClHeatmap *hm;
    ClLetterbox lb;
    char *grid; /* the file whose grid the maps take */
    guint width, height;
    char *heat_path, *mask_path, *gpkg_path;
    guint n_regions;
} GeoJob;

static void geo_job_free(GeoJob *j)
{
    if (j->self)
        g_object_remove_weak_pointer(G_OBJECT(j->self), (gpointer *)&j->self);
    g_clear_pointer(&j->hm, cl_heatmap_free);
    g_free(j->grid);
    g_free(j->heat_path);
    g_free(j->mask_path);
    g_free(j->gpkg_path);
    g_free(j);
}

/* The image the heat map is of (the later one; the earlier one when the model read an aligned
 * pair), when it is a georeferenced file. */
static ClDocument *grid_document(ClWindow *self, const ClHeatmap **hm, ClLetterbox *lb)
{
    gboolean in_frame = FALSE;
    const ClHeatmap *h = cl_compare_view_get_heatmap(self->compare_view, lb, &in_frame);
    if (!h || !self->sequence || self->sequence->len < 2)
        return NULL;
    guint k = in_frame ? self->pair_a : self->pair_b;
    if (k >= self->sequence->len)
        return NULL;
    ClDocument *doc = g_array_index(self->sequence, SeqItem, k).doc;
    const ClImage *img = doc ? cl_document_get_image(doc) : NULL;
    if (!img || !img->geo || !cl_document_get_file(doc))
        return NULL;
    if (hm)
        *hm = h;
    return doc;
}

gboolean cl_window_can_export_change_map(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    ClLetterbox lb;
    return !self->geo_export_busy && grid_document(self, NULL, &lb) != NULL;
}

static void geo_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    GeoJob *j = data;
    g_autofree float *heat = cl_heatmap_to_image(j->hm, &j->lb);
    GError *error = NULL;
    if (!heat) {
        g_task_return_new_error(task, G_IO_ERROR, G_IO_ERROR_NO_SPACE,
                                "not enough memory for the heat map at the image's size");
        return;
    }
    if (!cl_geo_write_geotiff(j->heat_path, j->grid, heat, j->width, j->height, FALSE, 0, NULL,
                              &error) ||
        !cl_geo_write_geotiff(j->mask_path, j->grid, heat, j->width, j->height, TRUE,
                              MASK_THRESHOLD, NULL, &error) ||
        !cl_geo_write_regions(j->gpkg_path, j->mask_path, &j->n_regions, &error)) {
        g_task_return_error(task, error);
        return;
    }
    g_task_return_boolean(task, TRUE);
}

static void geo_done(GObject *source, GAsyncResult *result, gpointer user_data)
{
    GeoJob *j = g_task_get_task_data(G_TASK(result));
    g_autoptr(GError) error = NULL;
    gboolean ok = g_task_propagate_boolean(G_TASK(result), &error);
    ClWindow *self = j->self;
    if (!self)
        return;
    self->geo_export_busy = FALSE;
    self->last_geo_export_ok = ok;
    cl_window_update_actions(self);
    if (!ok) {
        g_autofree char *text =
            g_strdup_printf(_("The change map was not saved: %s"), error->message);
        cl_window_toast(self, text);
        return;
    }
    g_autofree char *base = g_path_get_basename(j->heat_path);
    g_autofree char *text = g_strdup_printf(
        g_dngettext(NULL, "Change map saved as %s, its mask and %u changed region (GeoPackage)",
                    "Change map saved as %s, its mask and %u changed regions (GeoPackage)",
                    j->n_regions),
        base, j->n_regions);
    cl_window_toast(self, text);
}

void cl_window_export_change_map(ClWindow *self, GFile *file)
{
    g_return_if_fail(CL_IS_WINDOW(self));
    g_return_if_fail(G_IS_FILE(file));
    const ClHeatmap *hm = NULL;
    ClLetterbox lb;
    ClDocument *doc = grid_document(self, &hm, &lb);
    g_autofree char *path = g_file_get_path(file);
    if (!doc || !path || self->geo_export_busy) {
        cl_window_toast(self, !path ? _("Change maps are saved to local files only")
                                    : _("There is no heat map of a georeferenced image to save"));
        return;
    }
    const ClImage *img = cl_document_get_image(doc);
    GeoJob *j = g_new0(GeoJob, 1);
    j->self = self;
    g_object_add_weak_pointer(G_OBJECT(self), (gpointer *)&j->self);
    j->hm = cl_heatmap_copy(hm);
    j->lb = lb;
    j->grid = g_file_get_path(cl_document_get_file(doc));
    j->width = img->width;
    j->height = img->height;
    /* NAME.tif (the heat), NAME-mask.tif, NAME-regions.gpkg */
    g_autofree char *stem = g_str_has_suffix(path, ".tif") || g_str_has_suffix(path, ".TIF")
                                ? g_strndup(path, strlen(path) - 4)
                            : g_str_has_suffix(path, ".tiff") ? g_strndup(path, strlen(path) - 5)
                                                              : g_strdup(path);
    j->heat_path = g_strconcat(stem, ".tif", NULL);
    j->mask_path = g_strconcat(stem, "-mask.tif", NULL);
    j->gpkg_path = g_strconcat(stem, "-regions.gpkg", NULL);
    if (!j->grid) {
        geo_job_free(j);
        return;
    }
    self->geo_export_busy = TRUE;
    self->last_geo_export_ok = FALSE;
    cl_window_update_actions(self);
    g_autoptr(GTask) task = g_task_new(NULL, NULL, geo_done, NULL);
    g_task_set_task_data(task, j, (GDestroyNotify)geo_job_free);
    g_task_run_in_thread(task, geo_thread);
}

gboolean cl_window_get_geo_exporting(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->geo_export_busy;
}

gboolean cl_window_get_last_geo_export_ok(ClWindow *self)
{
    g_return_val_if_fail(CL_IS_WINDOW(self), FALSE);
    return self->last_geo_export_ok;
}
