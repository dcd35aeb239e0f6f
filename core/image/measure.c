/* measure.c - distances, rectangle statistics and areas in an image's own units (measure.h). */
#include "image/measure.h"

#include <math.h>
#include <string.h>

const char *cl_measure_unit_name(ClMeasureUnit u)
{
    switch (u) {
    case CL_MEASURE_MM: return "mm";
    case CL_MEASURE_M: return "m";
    case CL_MEASURE_PIXELS: break;
    }
    return "px";
}

/* a georeferenced raster whose CRS counts in degrees, where a pixel size is no length */
static gboolean geographic(const ClImage *img)
{
    const char *model = cl_image_get_meta(img, "GTModelTypeGeoKey");
    if (model && strstr(model, "geographic")) /* "2 (geographic)" */
        return TRUE;
    return img->geo->epsg >= 4000 && img->geo->epsg < 5000; /* EPSG's geographic 2-D CRSs */
}

ClMeasureUnit cl_measure_pixel_size(const ClImage *img, double *dx, double *dy)
{
    *dx = *dy = 1.0;
    if (!img)
        return CL_MEASURE_PIXELS;
    if (img->has_pixel_spacing && img->pixel_spacing[0] > 0 && img->pixel_spacing[1] > 0 &&
        isfinite(img->pixel_spacing[0]) && isfinite(img->pixel_spacing[1])) {
        *dy = img->pixel_spacing[0]; /* between rows */
        *dx = img->pixel_spacing[1]; /* between columns */
        return CL_MEASURE_MM;
    }
    if (img->geo && img->geo->pixel_size[0] > 0 && img->geo->pixel_size[1] > 0 &&
        isfinite(img->geo->pixel_size[0]) && isfinite(img->geo->pixel_size[1]) &&
        !geographic(img)) {
        *dx = img->geo->pixel_size[0];
        *dy = img->geo->pixel_size[1];
        return CL_MEASURE_M;
    }
    return CL_MEASURE_PIXELS;
}

ClMeasureUnit cl_measure_length(const ClImage *img, double x0, double y0, double x1, double y1,
                                double *length)
{
    double dx, dy;
    ClMeasureUnit u = cl_measure_pixel_size(img, &dx, &dy);
    *length = hypot((x1 - x0) * dx, (y1 - y0) * dy);
    return u;
}

gboolean cl_measure_region(const ClImage *img, guint frame, double x0, double y0, double x1,
                           double y1, ClMeasureRegion *out)
{
    memset(out, 0, sizeof *out);
    if (!img || frame >= cl_image_n_frames(img) || !cl_image_frame(img, frame)->data)
        return FALSE;
    const double lx = MIN(x0, x1), hx = MAX(x0, x1), ly = MIN(y0, y1), hy = MAX(y0, y1);
    /* pixel i's centre is i + 0.5: the columns with lx <= i + 0.5 < hx */
    const gint64 c0 = MAX((gint64)ceil(lx - 0.5), 0), c1 = MIN((gint64)ceil(hx - 0.5), img->width);
    const gint64 r0 = MAX((gint64)ceil(ly - 0.5), 0), r1 = MIN((gint64)ceil(hy - 0.5), img->height);
    if (c0 >= c1 || r0 >= r1)
        return FALSE;
    const ClFrame *f = cl_image_frame(img, frame);
    /* grey: channel 0; colour: the mean of R, G and B */
    const gboolean colour = img->layout == CL_LAYOUT_RGB || img->layout == CL_LAYOUT_RGBA;
    const float *plane = cl_image_plane(img, frame, 0);
    const float *green = colour ? cl_image_plane(img, frame, 1) : NULL;
    const float *blue = colour ? cl_image_plane(img, frame, 2) : NULL;
    double sum = 0, sum2 = 0, mn = INFINITY, mx = -INFINITY;
    guint64 n = 0;
    for (gint64 r = r0; r < r1; r++)
        for (gint64 c = c0; c < c1; c++) {
            const gsize at = (gsize)r * img->width + (gsize)c;
            const double stored =
                colour ? ((double)plane[at] + green[at] + blue[at]) / 3.0 : (double)plane[at];
            const double v = stored * f->rescale_slope + f->rescale_intercept;
            if (!isfinite(v))
                continue;
            sum += v, sum2 += v * v, n++;
            mn = MIN(mn, v), mx = MAX(mx, v);
        }
    if (n == 0)
        return FALSE;
    double dx, dy;
    out->unit = cl_measure_pixel_size(img, &dx, &dy);
    out->n = n;
    out->mean = sum / n;
    out->sd = sqrt(MAX(sum2 / n - out->mean * out->mean, 0.0));
    out->min = mn, out->max = mx;
    out->area = (double)(r1 - r0) * (double)(c1 - c0) * dx * dy;
    return TRUE;
}

/* three significant digits, at least whole units */
static char *number(double v)
{
    const double a = fabs(v);
    const int decimals = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
    return g_strdup_printf("%.*f", decimals, v);
}

char *cl_measure_length_text(ClMeasureUnit unit, double length)
{
    g_autofree char *n = number(length);
    return g_strdup_printf("%s %s", n, cl_measure_unit_name(unit));
}

char *cl_measure_area_text(ClMeasureUnit unit, double area)
{
    if (unit == CL_MEASURE_PIXELS)
        return NULL;
    g_autofree char *n = number(area);
    if (unit == CL_MEASURE_M && area >= 10000) {
        g_autofree char *ha = number(area / 10000);
        return g_strdup_printf("%s m² (%s ha)", n, ha);
    }
    return g_strdup_printf("%s %s²", n, cl_measure_unit_name(unit));
}

ClMeasureUnit cl_measure_image_area(const ClImage *img, double *area)
{
    double dx, dy;
    ClMeasureUnit u = cl_measure_pixel_size(img, &dx, &dy);
    *area = img ? (double)img->width * img->height * dx * dy : 0;
    return u;
}

char *cl_measure_region_text(const ClImage *img, const ClMeasureRegion *r)
{
    g_autofree char *mean = number(r->mean), *sd = number(r->sd);
    const char *units = img && img->rescale_type && *img->rescale_type ? img->rescale_type : NULL;
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "mean %s, SD %s", mean, sd);
    if (units)
        g_string_append_printf(s, " %s", units);
    g_string_append_printf(s, " over %" G_GUINT64_FORMAT " px", r->n);
    g_autofree char *a = cl_measure_area_text(r->unit, r->area);
    if (a)
        g_string_append_printf(s, ", %s", a);
    return g_string_free(s, FALSE);
}
