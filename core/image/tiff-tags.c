/* tiff-tags.c - the TIFF loader's metadata: baseline tags, and GeoTIFF (libgeotiff) keys, CRS
 * and the pixel-to-model transform. */
#include "image/tiff-private.h"

#include <geotiffio.h>
#include <math.h>
#include <string.h>
#include <xtiffio.h>

static void on_geo_error(GTIF *gt, int level, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static void on_geo_error(GTIF *gt, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cl_tiff_log_add(GTIFGetUserData(gt), level == LIBGEOTIFF_ERROR, "GeoTIFF", fmt, ap);
    va_end(ap);
}

/* ---- metadata ---- */

static const TIFFField *find_field(TIFF *tif, guint32 tag)
{
    return TIFFFindField(tif, tag, TIFF_ANY); /* unlike TIFFFieldWithTag, silent when unknown */
}

/* ASCII tag value, copied (NULL when absent). */
static char *get_ascii(TIFF *tif, guint32 tag)
{
    const TIFFField *fip = find_field(tif, tag);
    if (!fip || TIFFFieldDataType(fip) != TIFF_ASCII)
        return NULL;
    char *s = NULL;
    if (TIFFFieldPassCount(fip)) {
        if (TIFFFieldReadCount(fip) == TIFF_VARIABLE2) {
            guint32 n = 0;
            if (TIFFGetField(tif, tag, &n, &s) && s)
                return g_strndup(s, n);
        } else {
            guint16 n = 0;
            if (TIFFGetField(tif, tag, &n, &s) && s)
                return g_strndup(s, n);
        }
        return NULL;
    }
    return TIFFGetField(tif, tag, &s) && s ? g_strdup(s) : NULL;
}

/* Array-valued tag (doubles or shorts) with its count, whichever count width libtiff uses. */
static gboolean get_array(TIFF *tif, guint32 tag, TIFFDataType type, guint32 *count, void **v)
{
    const TIFFField *fip = find_field(tif, tag);
    *count = 0;
    *v = NULL;
    if (!fip || TIFFFieldDataType(fip) != type || !TIFFFieldPassCount(fip))
        return FALSE;
    if (TIFFFieldReadCount(fip) == TIFF_VARIABLE2) {
        guint32 n = 0;
        if (!TIFFGetField(tif, tag, &n, v))
            return FALSE;
        *count = n;
    } else {
        guint16 n = 0;
        if (!TIFFGetField(tif, tag, &n, v))
            return FALSE;
        *count = n;
    }
    return *v != NULL && *count > 0;
}

void cl_tiff_add_meta_printf(ClImage *img, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *v = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    cl_image_add_meta(img, key, v);
}

void cl_tiff_read_tags(TIFF *tif, ClImage *img, const Page *p)
{
    static const struct {
        guint32 tag;
        const char *key;
    } ascii[] = {
        { TIFFTAG_DOCUMENTNAME, "DocumentName" },
        { TIFFTAG_IMAGEDESCRIPTION, "ImageDescription" },
        { TIFFTAG_MAKE, "Make" },
        { TIFFTAG_MODEL, "Model" },
        { TIFFTAG_PAGENAME, "PageName" },
        { TIFFTAG_SOFTWARE, "Software" },
        { TIFFTAG_DATETIME, "DateTime" },
        { TIFFTAG_ARTIST, "Artist" },
        { TIFFTAG_HOSTCOMPUTER, "HostComputer" },
        { TIFFTAG_COPYRIGHT, "Copyright" },
        { TIFFTAG_GDAL_NODATA, "GDAL_NODATA" },
        { TIFFTAG_GDAL_METADATA, "GDAL_METADATA" },
    };
    for (guint i = 0; i < G_N_ELEMENTS(ascii); i++) {
        g_autofree char *v = get_ascii(tif, ascii[i].tag);
        if (v) {
            g_strstrip(v);
            cl_image_add_meta(img, ascii[i].key, v);
        }
    }
    char nbuf[32];
    cl_image_add_meta(img, "Compression",
                      cl_tiff_compression_name(p->compression, nbuf, sizeof nbuf));
    guint16 predictor = 0;
    if (TIFFGetField(tif, TIFFTAG_PREDICTOR, &predictor) && predictor > 1)
        cl_image_add_meta(img, "Predictor",
                          predictor == PREDICTOR_HORIZONTAL      ? "horizontal differencing"
                          : predictor == PREDICTOR_FLOATINGPOINT ? "floating point"
                                                                 : "unknown");
    if (p->spp > 1)
        cl_image_add_meta(img, "PlanarConfiguration",
                          p->planar == PLANARCONFIG_SEPARATE ? "separate planes" : "contiguous");
    if (p->tiled)
        cl_tiff_add_meta_printf(img, "Tiles", "%u × %u", p->tile_w, p->tile_h);
    else if (!p->use_rgba)
        cl_tiff_add_meta_printf(img, "RowsPerStrip", "%u", p->rows_per_strip);
    cl_image_add_meta(img, "ByteOrder", TIFFIsBigEndian(tif) ? "big-endian" : "little-endian");
    if (TIFFIsBigTIFF(tif))
        cl_image_add_meta(img, "BigTIFF", "yes");
    float xres = 0, yres = 0;
    guint16 unit = RESUNIT_INCH;
    if (TIFFGetField(tif, TIFFTAG_XRESOLUTION, &xres)) {
        cl_tiff_add_meta_printf(img, "XResolution", "%g", xres);
        if (TIFFGetField(tif, TIFFTAG_YRESOLUTION, &yres))
            cl_tiff_add_meta_printf(img, "YResolution", "%g", yres);
        TIFFGetFieldDefaulted(tif, TIFFTAG_RESOLUTIONUNIT, &unit);
        cl_image_add_meta(img, "ResolutionUnit",
                          unit == RESUNIT_CENTIMETER ? "centimetre"
                          : unit == RESUNIT_NONE     ? "none"
                                                     : "inch");
    }
    guint16 orientation = 0;
    if (TIFFGetField(tif, TIFFTAG_ORIENTATION, &orientation) && orientation != ORIENTATION_TOPLEFT)
        cl_tiff_add_meta_printf(img, "Orientation", "%u (rows and columns kept as stored)",
                                orientation);
    guint16 n_extra = 0, *extra = NULL;
    if (TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &n_extra, &extra) && n_extra > 0 && extra) {
        GString *s = g_string_new(NULL);
        for (guint i = 0; i < n_extra && i < 16; i++)
            g_string_append_printf(s, "%s%s", i ? ", " : "",
                                   extra[i] == EXTRASAMPLE_ASSOCALPHA   ? "associated alpha"
                                   : extra[i] == EXTRASAMPLE_UNASSALPHA ? "unassociated alpha"
                                                                        : "unspecified");
        cl_image_add_meta(img, "ExtraSamples", s->str);
        g_string_free(s, TRUE);
    }
}

/* ---- GeoTIFF ---- */

/* libgeotiff trusts the GeoKeyDirectory more than a fuzzed file deserves: check it first. */
static gboolean geokeys_valid(TIFF *tif, const guint16 *dir, guint32 n)
{
    if (n < 4 || n > 4 + 1000 || dir[0] != 1) /* version 1; libgeotiff keeps at most 1000 values */
        return FALSE;
    guint32 n_keys = dir[3];
    if (n_keys >= 250 || 4 + 4 * n_keys > n)
        return FALSE;
    guint32 n_doubles = 0;
    void *doubles = NULL;
    get_array(tif, TIFFTAG_GEODOUBLEPARAMS, TIFF_DOUBLE, &n_doubles, &doubles);
    if (n_doubles > 1000)
        return FALSE;
    g_autofree char *ascii = get_ascii(tif, TIFFTAG_GEOASCIIPARAMS);
    guint32 ascii_len = ascii ? (guint32)strlen(ascii) : 0;
    for (guint32 k = 0; k < n_keys; k++) {
        const guint16 *e = dir + 4 + 4 * k; /* key id, location, count, value or offset */
        guint32 count = e[2], off = e[3];
        switch (e[1]) {
        case 0:
            if (count != 1)
                return FALSE;
            break;
        case TIFFTAG_GEOKEYDIRECTORY:
            if (off + count > n)
                return FALSE;
            break;
        case TIFFTAG_GEODOUBLEPARAMS:
            if (!doubles || off + count > n_doubles)
                return FALSE;
            break;
        case TIFFTAG_GEOASCIIPARAMS:
            if (!ascii || off > ascii_len || off + count > ascii_len + 1)
                return FALSE;
            break;
        default: return FALSE;
        }
    }
    return TRUE;
}

static const char *crs_known_name(int epsg, char *buf, gsize n)
{
    switch (epsg) {
    case 4326: return "WGS 84";
    case 4258: return "ETRS89";
    case 4269: return "NAD83";
    case 4267: return "NAD27";
    case 3857: return "WGS 84 / Pseudo-Mercator";
    case 3035: return "ETRS89 / LAEA Europe";
    }
    if (epsg >= 32601 && epsg <= 32660)
        g_snprintf(buf, n, "WGS 84 / UTM zone %dN", epsg - 32600);
    else if (epsg >= 32701 && epsg <= 32760)
        g_snprintf(buf, n, "WGS 84 / UTM zone %dS", epsg - 32700);
    else if (epsg >= 25828 && epsg <= 25838)
        g_snprintf(buf, n, "ETRS89 / UTM zone %dN", epsg - 25800);
    else if (epsg >= 26901 && epsg <= 26923)
        g_snprintf(buf, n, "NAD83 / UTM zone %dN", epsg - 26900);
    else
        return NULL;
    return buf;
}

static char *geokey_short_text(geokey_t key, guint v)
{
    char nbuf[64];
    const char *name = NULL;
    if (v == KvUserDefined)
        name = "user-defined";
    else if (key == GTModelTypeGeoKey)
        name = v == ModelTypeProjected    ? "projected"
               : v == ModelTypeGeographic ? "geographic"
               : v == ModelTypeGeocentric ? "geocentric"
                                          : NULL;
    else if (key == GTRasterTypeGeoKey)
        name = v == RasterPixelIsArea    ? "PixelIsArea"
               : v == RasterPixelIsPoint ? "PixelIsPoint"
                                         : NULL;
    else if (key == ProjectedCSTypeGeoKey || key == GeographicTypeGeoKey) {
        const char *crs = crs_known_name((int)v, nbuf, sizeof nbuf);
        return g_strdup_printf("EPSG:%u%s%s", v, crs ? " " : "", crs ? crs : "");
    } else if (key == ProjLinearUnitsGeoKey || key == GeogLinearUnitsGeoKey ||
               key == VerticalUnitsGeoKey || key == GeogAngularUnitsGeoKey)
        name = v == 9001   ? "metre"
               : v == 9002 ? "foot"
               : v == 9003 ? "US survey foot"
               : v == 9101 ? "radian"
               : v == 9102 ? "degree"
                           : NULL;
    return name ? g_strdup_printf("%u (%s)", v, name) : g_strdup_printf("%u", v);
}

/* Every GeoKey present, as metadata, in key order. */
static void geokeys_to_meta(GTIF *gtif, ClImage *img)
{
    for (guint key = 1; key < 65535; key++) {
        int size = 0;
        tagtype_t type = TYPE_UNKNOWN;
        int count = GTIFKeyInfo(gtif, (geokey_t)key, &size, &type);
        if (count <= 0)
            continue;
        const char *kname = GTIFKeyNameEx(gtif, (geokey_t)key);
        g_autofree char *value = NULL;
        if (type == TYPE_ASCII) {
            char buf[1024] = "";
            GTIFKeyGetASCII(gtif, (geokey_t)key, buf, sizeof buf);
            gsize l = strlen(buf);
            while (l > 0 && buf[l - 1] == '|') /* GeoASCIIParams separator */
                buf[--l] = '\0';
            value = g_strdup(buf);
        } else if (type == TYPE_SHORT) {
            guint16 v[16];
            int n = GTIFKeyGetSHORT(gtif, (geokey_t)key, v, 0, MIN(count, 16));
            if (n == 1) {
                value = geokey_short_text((geokey_t)key, v[0]);
            } else {
                GString *s = g_string_new(NULL);
                for (int i = 0; i < n; i++)
                    g_string_append_printf(s, "%s%u", i ? " " : "", v[i]);
                value = g_string_free(s, FALSE);
            }
        } else if (type == TYPE_DOUBLE) {
            double v[16];
            int n = GTIFKeyGetDOUBLE(gtif, (geokey_t)key, v, 0, MIN(count, 16));
            GString *s = g_string_new(NULL);
            for (int i = 0; i < n; i++)
                g_string_append_printf(s, "%s%.15g", i ? " " : "", v[i]);
            value = g_string_free(s, FALSE);
        }
        if (value)
            cl_image_add_meta(img, kname, value);
    }
}

static void set_transform(ClGeoInfo *g, const double t[6])
{
    memcpy(g->transform, t, sizeof g->transform);
    g->has_transform = TRUE;
    g->origin[0] = t[0];
    g->origin[1] = t[3];
    g->pixel_size[0] = hypot(t[1], t[4]);
    g->pixel_size[1] = hypot(t[2], t[5]);
}

void cl_tiff_read_geo(TIFF *tif, ClImage *img, TiffLog *log)
{
    guint32 n_tie = 0, n_scale = 0, n_mat = 0, n_dir = 0;
    void *vtie, *vscale, *vmat, *vdir;
    gboolean has_tie = get_array(tif, TIFFTAG_GEOTIEPOINTS, TIFF_DOUBLE, &n_tie, &vtie);
    gboolean has_scale = get_array(tif, TIFFTAG_GEOPIXELSCALE, TIFF_DOUBLE, &n_scale, &vscale);
    gboolean has_mat = get_array(tif, TIFFTAG_GEOTRANSMATRIX, TIFF_DOUBLE, &n_mat, &vmat);
    gboolean has_dir = get_array(tif, TIFFTAG_GEOKEYDIRECTORY, TIFF_SHORT, &n_dir, &vdir);
    if (!has_tie && !has_scale && !has_mat && !has_dir)
        return;
    const double *tie = vtie, *scale = vscale, *mat = vmat;
    ClGeoInfo *g = img->geo = g_new0(ClGeoInfo, 1);

    guint16 model = 0, raster = 0, pcs = 0, gcs = 0;
    char citation[512] = "";
    if (has_dir && geokeys_valid(tif, vdir, n_dir)) {
        GTIF *gtif = GTIFNewEx(tif, on_geo_error, log);
        if (gtif) {
            GTIFKeyGetSHORT(gtif, GTModelTypeGeoKey, &model, 0, 1);
            GTIFKeyGetSHORT(gtif, GTRasterTypeGeoKey, &raster, 0, 1);
            GTIFKeyGetSHORT(gtif, ProjectedCSTypeGeoKey, &pcs, 0, 1);
            GTIFKeyGetSHORT(gtif, GeographicTypeGeoKey, &gcs, 0, 1);
            if (!GTIFKeyGetASCII(gtif, GTCitationGeoKey, citation, sizeof citation) &&
                !GTIFKeyGetASCII(gtif, PCSCitationGeoKey, citation, sizeof citation))
                GTIFKeyGetASCII(gtif, GeogCitationGeoKey, citation, sizeof citation);
            geokeys_to_meta(gtif, img);
            GTIFFree(gtif);
        } else {
            cl_image_add_meta(img, "GeoKeyDirectory", "unreadable, ignored");
        }
    } else if (has_dir) {
        cl_image_add_meta(img, "GeoKeyDirectory", "malformed, ignored");
    }

    gboolean pcs_ok = pcs > 0 && pcs != KvUserDefined, gcs_ok = gcs > 0 && gcs != KvUserDefined;
    if (model == ModelTypeGeographic)
        g->epsg = gcs_ok ? gcs : 0;
    else
        g->epsg = pcs_ok ? pcs : gcs_ok ? gcs : 0;
    gsize cl = strlen(citation);
    while (cl > 0 && (citation[cl - 1] == '|' || citation[cl - 1] == ' '))
        citation[--cl] = '\0';
    char nbuf[64];
    const char *known = g->epsg ? crs_known_name(g->epsg, nbuf, sizeof nbuf) : NULL;
    if (cl > 0)
        g->crs_name = g_utf8_make_valid(citation, -1);
    else if (known)
        g->crs_name = g_strdup(known);
    g->pixel_is_point = raster == RasterPixelIsPoint;

    double t[6];
    gboolean have = FALSE;
    if (has_mat && n_mat >= 16) {
        /* ModelTransformation: a 4×4 row-major matrix mapping (col, row, 0, 1) to (x, y, z, 1) */
        double m[6] = { mat[3], mat[0], mat[1], mat[7], mat[4], mat[5] };
        memcpy(t, m, sizeof t);
        have = TRUE;
        GString *s = g_string_new(NULL);
        for (guint i = 0; i < 16; i++)
            g_string_append_printf(s, "%s%.15g", i ? " " : "", mat[i]);
        cl_image_add_meta(img, "ModelTransformation", s->str);
        g_string_free(s, TRUE);
    } else if (has_tie && n_tie >= 6 && has_scale && n_scale >= 2) {
        /* first tie point (I, J, K) -> (X, Y, Z) and the pixel scale; rows go south */
        double m[6] = { tie[3] - tie[0] * scale[0], scale[0], 0,
                        tie[4] + tie[1] * scale[1], 0,        -scale[1] };
        memcpy(t, m, sizeof t);
        have = TRUE;
    }
    if (has_tie && n_tie >= 6)
        cl_tiff_add_meta_printf(img, "ModelTiepoint",
                                "(%.15g, %.15g, %.15g) -> (%.15g, %.15g, %.15g)%s", tie[0], tie[1],
                                tie[2], tie[3], tie[4], tie[5], n_tie >= 12 ? " and more" : "");
    if (has_scale && n_scale >= 2)
        cl_tiff_add_meta_printf(img, "ModelPixelScale", "%.15g %.15g %.15g", scale[0], scale[1],
                                n_scale >= 3 ? scale[2] : 0.0);
    if (have) {
        /* PixelIsPoint ties pixel centres: shift by half a pixel so the transform (like GDAL's)
         * and origin refer to the upper-left corner of pixel (0, 0). */
        if (g->pixel_is_point) {
            t[0] -= 0.5 * t[1] + 0.5 * t[2];
            t[3] -= 0.5 * t[4] + 0.5 * t[5];
        }
        gboolean finite = TRUE;
        for (guint i = 0; i < 6; i++)
            finite = finite && isfinite(t[i]);
        if (finite)
            set_transform(g, t);
    }
}
