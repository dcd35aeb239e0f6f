/* image.c - ClImage lifetime, limits, metadata and format detection (the loaders' dispatcher is
 * load.c, or load-png.c in the engine-only programs). */
#include "image/image.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(cl - image - error - quark, cl_image_error)

void cl_image_limits_init(ClImageLimits *limits)
{
    limits->max_pixels = (guint64)1 << 28;
    limits->max_frames = 4096;
    limits->max_channels = 1024;
    limits->header_only = FALSE;
}

gboolean cl_image_check_limits(const ClImageLimits *limits, guint64 width, guint64 height,
                               guint64 frames, guint64 channels, GError **error)
{
    ClImageLimits def;
    if (!limits) {
        cl_image_limits_init(&def);
        limits = &def;
    }
    if (width == 0 || height == 0 || frames == 0 || channels == 0) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_CORRUPT,
                    "image has an empty dimension (%" G_GUINT64_FORMAT " × %" G_GUINT64_FORMAT
                    ", %" G_GUINT64_FORMAT " frames, %" G_GUINT64_FORMAT " channels)",
                    width, height, frames, channels);
        return FALSE;
    }
    if (frames > limits->max_frames) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "image has %" G_GUINT64_FORMAT " frames; the limit is %u", frames,
                    limits->max_frames);
        return FALSE;
    }
    if (channels > limits->max_channels) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "image has %" G_GUINT64_FORMAT " channels; the limit is %u", channels,
                    limits->max_channels);
        return FALSE;
    }
    guint64 pixels = 0, all = 0, samples = 0;
    gboolean ok =
        g_uint64_checked_mul(&pixels, width, height) && g_uint64_checked_mul(&all, pixels, frames);
    if (!ok || all > limits->max_pixels) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "image of %" G_GUINT64_FORMAT " × %" G_GUINT64_FORMAT
                    " pixels × %" G_GUINT64_FORMAT
                    " frames is over the pixel budget of %" G_GUINT64_FORMAT " pixels",
                    width, height, frames, limits->max_pixels);
        return FALSE;
    }
    /* Samples are kept as float: allow 4 samples a pixel of the budget (4 GiB at the default). */
    if (!g_uint64_checked_mul(&samples, all, channels) || samples / 4 > limits->max_pixels) {
        g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                    "image of %" G_GUINT64_FORMAT " × %" G_GUINT64_FORMAT
                    " pixels × %" G_GUINT64_FORMAT " frames × %" G_GUINT64_FORMAT
                    " channels is over the sample budget of %" G_GUINT64_FORMAT,
                    width, height, frames, channels, 4 * limits->max_pixels);
        return FALSE;
    }
    return TRUE;
}

ClImage *cl_image_new(ClImageFormat format)
{
    ClImage *img = g_new0(ClImage, 1);
    img->format = format;
    img->frames = g_ptr_array_new();
    img->metadata = g_ptr_array_new();
    img->windows = g_array_new(FALSE, TRUE, sizeof(ClWindowPreset));
    img->voi_luts = g_ptr_array_new();
    img->instance_number = -1;
    return img;
}

static void free_frame(ClFrame *f)
{
    if (!f)
        return;
    g_free(f->data);
    g_free(f);
}

void cl_image_free(ClImage *img)
{
    if (!img)
        return;
    for (guint i = 0; i < img->frames->len; i++)
        free_frame(g_ptr_array_index(img->frames, i));
    g_ptr_array_unref(img->frames);
    for (guint i = 0; i < img->metadata->len; i++) {
        ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        g_free(e->key);
        g_free(e->value);
        g_free(e);
    }
    g_ptr_array_unref(img->metadata);
    for (guint i = 0; i < img->windows->len; i++)
        g_free(g_array_index(img->windows, ClWindowPreset, i).explanation);
    g_array_unref(img->windows);
    for (guint i = 0; i < img->voi_luts->len; i++) {
        ClVoiLut *l = g_ptr_array_index(img->voi_luts, i);
        g_free(l->data);
        g_free(l->explanation);
        g_free(l);
    }
    g_ptr_array_unref(img->voi_luts);
    if (img->geo) {
        g_free(img->geo->crs_name);
        g_free(img->geo->crs_wkt);
        g_free(img->geo);
    }
    g_free(img->path);
    g_free(img->photometric);
    g_free(img->transfer_syntax_uid);
    g_free(img->transfer_syntax);
    g_free(img->modality);
    g_free(img->rescale_type);
    g_free(img->patient_id);
    g_free(img->patient_name);
    g_free(img->study_uid);
    g_free(img->series_uid);
    g_free(img->sop_instance_uid);
    g_free(img->study_datetime);
    g_free(img->acquisition_datetime);
    g_free(img);
}

gboolean cl_image_alloc_frames(ClImage *img, guint n_frames, GError **error)
{
    g_return_val_if_fail(img && img->width && img->height && img->channels, FALSE);
    gsize n = (gsize)img->width * img->height * img->channels;
    for (guint i = 0; i < n_frames; i++) {
        float *data = g_try_malloc0_n(n, sizeof(float));
        if (!data) {
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_TOO_LARGE,
                        "not enough memory for %u frames of %u × %u × %u samples", n_frames,
                        img->width, img->height, img->channels);
            return FALSE;
        }
        ClFrame *f = g_new0(ClFrame, 1);
        f->data = data;
        f->rescale_slope = 1.0;
        f->rescale_intercept = 0.0;
        g_ptr_array_add(img->frames, f);
    }
    return TRUE;
}

void cl_image_add_meta(ClImage *img, const char *key, const char *value)
{
    if (!key || !value)
        return;
    ClMetaEntry *e = g_new(ClMetaEntry, 1);
    e->key = g_utf8_make_valid(key, -1);
    gsize n = strlen(value);
    if (n > CL_IMAGE_META_MAX) {
        /* a value is for reading and searching, not a payload: the first CL_IMAGE_META_MAX bytes,
         * cut at a character, and how long it was */
        g_autofree char *head = g_utf8_make_valid(value, CL_IMAGE_META_MAX);
        const char *end = head + strlen(head);
        while (end > head && (gsize)(end - head) > CL_IMAGE_META_MAX - 4)
            end = g_utf8_find_prev_char(head, end);
        e->value = g_strdup_printf("%.*s… (cut: %" G_GSIZE_FORMAT " bytes in the file)",
                                   (int)(end - head), head, n);
    } else {
        e->value = g_utf8_make_valid(value, -1);
    }
    g_ptr_array_add(img->metadata, e);
}

const char *cl_image_get_meta(const ClImage *img, const char *key)
{
    for (guint i = 0; i < img->metadata->len; i++) {
        ClMetaEntry *e = g_ptr_array_index(img->metadata, i);
        if (strcmp(e->key, key) == 0)
            return e->value;
    }
    return NULL;
}

void cl_image_add_window(ClImage *img, double center, double width, const char *explanation)
{
    ClWindowPreset w = { center, width, explanation ? g_utf8_make_valid(explanation, -1) : NULL };
    g_array_append_val(img->windows, w);
}

ClImageFormat cl_image_detect_format(const guint8 *d, gsize n)
{
    if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return CL_IMAGE_FORMAT_PNG;
    /* "DICM" after the 128-byte preamble first: PS3.10 §7.1 lets the preamble hold another
     * format's header, and dual-personality files put a TIFF header there. */
    if (n >= 132 && memcmp(d + 128, "DICM", 4) == 0)
        return CL_IMAGE_FORMAT_DICOM;
    if (n >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0 ||
                   memcmp(d, "II+\0", 4) == 0 || memcmp(d, "MM\0+", 4) == 0))
        return CL_IMAGE_FORMAT_TIFF;
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF)
        return CL_IMAGE_FORMAT_JPEG;
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return CL_IMAGE_FORMAT_WEBP;
    if (n >= 2 && d[0] == 'B' && d[1] == 'M')
        return CL_IMAGE_FORMAT_BMP;
    if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return CL_IMAGE_FORMAT_GIF;
    /* DICOM without the 128-byte preamble (old ACR-NEMA style streams): starts with a group
     * 0x0002 or 0x0008 element in little endian. */
    if (n >= 8 && d[1] == 0x00 && (d[0] == 0x02 || d[0] == 0x08) && d[3] == 0x00)
        return CL_IMAGE_FORMAT_DICOM;
    return CL_IMAGE_FORMAT_UNKNOWN;
}

const char *cl_image_format_name(ClImageFormat f)
{
    switch (f) {
    case CL_IMAGE_FORMAT_PNG: return "PNG";
    case CL_IMAGE_FORMAT_TIFF: return "TIFF";
    case CL_IMAGE_FORMAT_DICOM: return "DICOM";
    case CL_IMAGE_FORMAT_JPEG: return "JPEG";
    case CL_IMAGE_FORMAT_WEBP: return "WebP";
    case CL_IMAGE_FORMAT_BMP: return "BMP";
    case CL_IMAGE_FORMAT_GIF: return "GIF";
    case CL_IMAGE_FORMAT_GDAL: return "GDAL";
    default: return "unknown";
    }
}

const char *cl_sample_format_name(ClSampleFormat f)
{
    switch (f) {
    case CL_SAMPLE_INT: return "int";
    case CL_SAMPLE_FLOAT: return "float";
    default: return "uint";
    }
}

const char *cl_channel_layout_name(ClChannelLayout l)
{
    switch (l) {
    case CL_LAYOUT_GREY: return "grey";
    case CL_LAYOUT_GREY_ALPHA: return "grey+alpha";
    case CL_LAYOUT_RGB: return "rgb";
    case CL_LAYOUT_RGBA: return "rgba";
    default: return "bands";
    }
}

void cl_image_frame_stats(const ClImage *img, guint frame, ClFrameStats *out)
{
    const ClFrame *f = cl_image_frame(img, frame);
    gsize n = (gsize)img->width * img->height * img->channels;
    double lo = INFINITY, hi = -INFINITY, sum = 0.0;
    gsize count = 0;
    for (gsize i = 0; i < n; i++) {
        double v = f->data[i];
        if (!isfinite(v))
            continue; /* NaN/Inf samples (float TIFF nodata) do not count */
        if (v < lo)
            lo = v;
        if (v > hi)
            hi = v;
        sum += v;
        count++;
    }
    double s = f->rescale_slope, b = f->rescale_intercept;
    if (count == 0) {
        out->min = out->max = out->mean = NAN;
        return;
    }
    double a = lo * s + b, c = hi * s + b;
    out->min = MIN(a, c);
    out->max = MAX(a, c);
    out->mean = (sum / (double)count) * s + b;
}
