/* cl-document.c - ClDocument: an opened image file, shared by the views and workers that use it. */
#include "cl-document.h"

struct _ClDocument {
    GObject parent_instance;
    ClImage *image;
    GFile *file;
    char *name;
};

G_DEFINE_FINAL_TYPE(ClDocument, cl_document, G_TYPE_OBJECT)

static void cl_document_finalize(GObject *object)
{
    ClDocument *self = CL_DOCUMENT(object);
    g_clear_pointer(&self->image, cl_image_free);
    g_clear_object(&self->file);
    g_clear_pointer(&self->name, g_free);
    G_OBJECT_CLASS(cl_document_parent_class)->finalize(object);
}

static void cl_document_class_init(ClDocumentClass *klass)
{
    G_OBJECT_CLASS(klass)->finalize = cl_document_finalize;
}

static void cl_document_init(ClDocument *self) {}

/* The name people recognise: the file's display name, else the basename of whatever we have. */
static char *display_name_for(GFile *file, const ClImage *image)
{
    if (file) {
        g_autoptr(GFileInfo) info = g_file_query_info(file, G_FILE_ATTRIBUTE_STANDARD_DISPLAY_NAME,
                                                      G_FILE_QUERY_INFO_NONE, NULL, NULL);
        if (info && g_file_info_get_display_name(info))
            return g_strdup(g_file_info_get_display_name(info));
        return g_file_get_basename(file);
    }
    if (image && image->path)
        return g_path_get_basename(image->path);
    return g_strdup("image");
}

ClDocument *cl_document_new(ClImage *image, GFile *file)
{
    g_return_val_if_fail(image != NULL, NULL);
    g_return_val_if_fail(file == NULL || G_IS_FILE(file), NULL);
    ClDocument *self = g_object_new(CL_TYPE_DOCUMENT, NULL);
    self->image = image;
    self->file = file ? g_object_ref(file) : NULL;
    self->name = display_name_for(file, image);
    return self;
}

ClDocument *cl_document_load(GFile *file, const ClImageLimits *limits, GCancellable *cancellable,
                             GError **error)
{
    g_return_val_if_fail(G_IS_FILE(file), NULL);
    if (g_cancellable_set_error_if_cancelled(cancellable, error))
        return NULL;

    ClImage *image = NULL;
    g_autofree char *path = g_file_get_path(file);
    if (path) {
        image = cl_image_load(path, limits, error);
    } else {
        g_autofree char *uri = g_file_get_uri(file);
        g_autofree char *contents = NULL;
        gsize len = 0;
        g_autoptr(GError) local = NULL;
        if (!g_file_load_contents(file, cancellable, &contents, &len, NULL, &local)) {
            if (g_error_matches(local, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
                g_propagate_error(error, g_steal_pointer(&local));
                return NULL;
            }
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO, "%s: cannot open: %s", uri,
                        local->message);
            return NULL;
        }
        image = cl_image_load_data((const guint8 *)contents, len, uri, limits, error);
    }
    if (!image)
        return NULL;
    return cl_document_new(image, file);
}

const ClImage *cl_document_get_image(ClDocument *self)
{
    g_return_val_if_fail(CL_IS_DOCUMENT(self), NULL);
    return self->image;
}

GFile *cl_document_get_file(ClDocument *self)
{
    g_return_val_if_fail(CL_IS_DOCUMENT(self), NULL);
    return self->file;
}

const char *cl_document_get_name(ClDocument *self)
{
    g_return_val_if_fail(CL_IS_DOCUMENT(self), NULL);
    return self->name;
}

guint cl_document_get_n_frames(ClDocument *self)
{
    g_return_val_if_fail(CL_IS_DOCUMENT(self), 0);
    return cl_image_n_frames(self->image);
}
