/* geoexport.c - change maps on an input's grid through GDAL: GeoTIFF and GeoPackage polygons. */
#include "image/geoexport.h"

#include <gdal.h>
#include <gdal_alg.h>
#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <ogr_api.h>
#include <ogr_srs_api.h>

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "image/image.h"
#include "image/loaders.h"

static void set_gdal_error(GError **error, const char *path, const char *what)
{
    const char *m = CPLGetLastErrorMsg();
    g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO, "%s: %s%s%s", path, what,
                m && *m ? ": " : "", m && *m ? m : "");
}

static gboolean write_geotiff(const char *tmp, GDALDatasetH grid, const float *values, guint width,
                              guint height, gboolean as_mask, double threshold,
                              gboolean *georeferenced, GError **error)
{
    const int W = GDALGetRasterXSize(grid), H = GDALGetRasterYSize(grid);
    char *opts[] = { "COMPRESS=DEFLATE", "TILED=YES", "BIGTIFF=IF_SAFER", NULL };
    GDALDatasetH out = GDALCreate(GDALGetDriverByName("GTiff"), tmp, W, H, 1,
                                  as_mask ? GDT_Byte : GDT_Float32, opts);
    if (!out) {
        set_gdal_error(error, tmp, "cannot create the GeoTIFF");
        return FALSE;
    }
    double t[6];
    gboolean geo = FALSE;
    if (GDALGetGeoTransform(grid, t) == CE_None) {
        GDALSetGeoTransform(out, t);
        geo = TRUE;
    }
    const char *wkt = GDALGetProjectionRef(grid);
    if (wkt && *wkt)
        GDALSetProjection(out, wkt);
    else
        geo = FALSE;
    if (georeferenced)
        *georeferenced = geo;
    GDALRasterBandH band = GDALGetRasterBand(out, 1);
    if (as_mask)
        GDALSetDescription(band, "changed (1) where the heat is at or above the threshold");
    /* nearest source column of each grid column: the source pixel under the grid pixel's centre */
    guint *col = g_new(guint, W);
    for (int x = 0; x < W; x++)
        col[x] = MIN((guint)(((double)x + 0.5) * width / W), width - 1);
    float *row = g_new(float, W);
    gboolean ok = TRUE;
    for (int y = 0; y < H && ok; y++) {
        const float *src =
            values + (gsize)MIN((guint)(((double)y + 0.5) * height / H), height - 1) * width;
        for (int x = 0; x < W; x++) {
            float v = src[col[x]];
            row[x] = as_mask ? (isfinite(v) && v >= threshold ? 1.0f : 0.0f) : v;
        }
        ok = GDALRasterIO(band, GF_Write, 0, y, W, 1, row, W, 1, GDT_Float32, 0, 0) == CE_None;
    }
    g_free(row);
    g_free(col);
    if (!ok)
        set_gdal_error(error, tmp, "cannot write the GeoTIFF");
    GDALFlushCache(out);
    GDALClose(out);
    return ok;
}

gboolean cl_geo_write_geotiff(const char *out_path, const char *grid_path, const float *values,
                              guint width, guint height, gboolean as_mask, double threshold,
                              gboolean *georeferenced, GError **error)
{
    g_return_val_if_fail(out_path && grid_path && values && width && height, FALSE);
    cl_gdal_init();
    CPLPushErrorHandler(CPLQuietErrorHandler);
    CPLErrorReset();
    GDALDatasetH grid = GDALOpenEx(grid_path, GDAL_OF_RASTER | GDAL_OF_READONLY, NULL, NULL, NULL);
    gboolean ok = FALSE;
    if (!grid) {
        set_gdal_error(error, grid_path, "cannot open it to copy its grid");
    } else {
        g_autofree char *tmp = g_strdup_printf("%s.part", out_path);
        ok = write_geotiff(tmp, grid, values, width, height, as_mask, threshold, georeferenced,
                           error);
        GDALClose(grid);
        if (ok && g_rename(tmp, out_path) != 0) {
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO, "%s: cannot write: %s", out_path,
                        g_strerror(errno));
            ok = FALSE;
        }
        if (!ok)
            g_unlink(tmp);
    }
    CPLPopErrorHandler();
    return ok;
}

/* The polygon's area in m²; NAN when the CRS is unknown or its unit is not a length. */
static double area_m2(OGRGeometryH g, OGRSpatialReferenceH srs)
{
    if (!srs)
        return NAN;
    if (OSRIsProjected(srs)) {
        double to_m = OSRGetLinearUnits(srs, NULL);
        return to_m > 0 ? OGR_G_Area(g) * to_m * to_m : NAN;
    }
    if (!OSRIsGeographic(srs))
        return NAN;
    /* geographic: a Lambert azimuthal equal-area projection about the polygon's centre */
    OGREnvelope e;
    OGR_G_GetEnvelope(g, &e);
    OGRSpatialReferenceH laea = OSRNewSpatialReference(NULL);
    OGRSpatialReferenceH src = OSRClone(srs);
    OSRSetAxisMappingStrategy(src, OAMS_TRADITIONAL_GIS_ORDER);
    OSRCopyGeogCSFrom(laea, src);
    OSRSetLAEA(laea, (e.MinY + e.MaxY) / 2, (e.MinX + e.MaxX) / 2, 0, 0);
    OSRSetAxisMappingStrategy(laea, OAMS_TRADITIONAL_GIS_ORDER);
    OGRCoordinateTransformationH ct = OCTNewCoordinateTransformation(src, laea);
    double a = NAN;
    if (ct) {
        OGRGeometryH c = OGR_G_Clone(g);
        if (OGR_G_Transform(c, ct) == OGRERR_NONE)
            a = OGR_G_Area(c);
        OGR_G_DestroyGeometry(c);
        OCTDestroyCoordinateTransformation(ct);
    }
    OSRDestroySpatialReference(src);
    OSRDestroySpatialReference(laea);
    return a;
}

static gboolean write_regions(const char *tmp, GDALDatasetH mask, guint *n_regions, GError **error)
{
    GDALDatasetH out = GDALCreate(GDALGetDriverByName("GPKG"), tmp, 0, 0, 0, GDT_Unknown, NULL);
    if (!out) {
        set_gdal_error(error, tmp, "cannot create the GeoPackage");
        return FALSE;
    }
    OGRSpatialReferenceH srs = GDALGetSpatialRef(mask);
    OGRLayerH layer = GDALDatasetCreateLayer(out, "changed_regions", srs, wkbPolygon, NULL);
    gboolean ok = layer != NULL;
    if (ok) {
        OGRFieldDefnH f = OGR_Fld_Create("value", OFTInteger);
        ok = OGR_L_CreateField(layer, f, TRUE) == OGRERR_NONE;
        OGR_Fld_Destroy(f);
    }
    GDALRasterBandH band = GDALGetRasterBand(mask, 1);
    char *opts[] = { "8CONNECTED=8", NULL };
    /* the band is its own mask: only the 1s become polygons */
    ok = ok && GDALPolygonize(band, band, layer, 0, opts, NULL, NULL) == CE_None;
    if (ok) {
        OGRFieldDefnH a = OGR_Fld_Create("area_m2", OFTReal);
        ok = OGR_L_CreateField(layer, a, TRUE) == OGRERR_NONE;
        OGR_Fld_Destroy(a);
    }
    guint n = 0;
    if (ok) {
        ok = OGR_L_StartTransaction(layer) == OGRERR_NONE;
        OGR_L_ResetReading(layer);
        int ia = OGR_FD_GetFieldIndex(OGR_L_GetLayerDefn(layer), "area_m2");
        OGRFeatureH feat;
        while (ok && (feat = OGR_L_GetNextFeature(layer)) != NULL) {
            double a = area_m2(OGR_F_GetGeometryRef(feat), srs);
            if (isfinite(a))
                OGR_F_SetFieldDouble(feat, ia, a);
            else
                OGR_F_SetFieldNull(feat, ia);
            ok = OGR_L_SetFeature(layer, feat) == OGRERR_NONE;
            OGR_F_Destroy(feat);
            n++;
        }
        ok = OGR_L_CommitTransaction(layer) == OGRERR_NONE && ok;
    }
    if (!ok)
        set_gdal_error(error, tmp, "cannot write the changed regions");
    GDALClose(out);
    *n_regions = n;
    return ok;
}

gboolean cl_geo_write_regions(const char *gpkg_path, const char *mask_path, guint *n_regions,
                              GError **error)
{
    g_return_val_if_fail(gpkg_path && mask_path, FALSE);
    cl_gdal_init();
    CPLPushErrorHandler(CPLQuietErrorHandler);
    CPLErrorReset();
    guint n = 0;
    gboolean ok = FALSE;
    GDALDatasetH mask = GDALOpenEx(mask_path, GDAL_OF_RASTER | GDAL_OF_READONLY, NULL, NULL, NULL);
    if (!mask) {
        set_gdal_error(error, mask_path, "cannot open the mask");
    } else {
        g_autofree char *tmp = g_strdup_printf("%s.part.gpkg", gpkg_path);
        g_unlink(tmp);
        ok = write_regions(tmp, mask, &n, error);
        GDALClose(mask);
        if (ok && g_rename(tmp, gpkg_path) != 0) {
            g_set_error(error, CL_IMAGE_ERROR, CL_IMAGE_ERROR_IO, "%s: cannot write: %s", gpkg_path,
                        g_strerror(errno));
            ok = FALSE;
        }
        if (!ok)
            g_unlink(tmp);
    }
    CPLPopErrorHandler();
    if (n_regions)
        *n_regions = n;
    return ok;
}
