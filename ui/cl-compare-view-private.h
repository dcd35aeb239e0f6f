/* cl-compare-view-private.h - ClCompareView's instance struct, shared with its companion file
 * (cl-compare-view-display.c: captions, the pointer readout, window/level and its presets). */
#pragma once

#include "cl-compare-view.h"

G_BEGIN_DECLS

struct _ClCompareView {
    GtkBox parent_instance;

    /* template children */
    ClImageView *view_a, *view_b;
    GtkLabel *name_a, *info_a, *name_b, *info_b;
    GtkWidget *pane_b;
    GtkPaned *paned;          /* the panes | the side panel */
    GtkWidget *side_scroller; /* the paned's end child, around side_box */
    GtkBox *side_box, *bottom_box;
    GtkLabel *mode_label, *changed_label, *align_label;
    GtkScale *mode_scale, *heat_scale;
    GtkMenuButton *preset_button;
    GtkButton *masks_button;
    GtkDropDown *layer_dropdown;

    int side_width;   /* the side panel's width (with the divider), as last set or dragged */
    gboolean placing; /* the divider is being placed from side_width, not dragged */
    guint place_tick; /* places it once the panes are laid out */

    gboolean link_views;
    gboolean sync_window_level;
    ClViewport *shared_viewport;
    ClViewport *own_viewport[2];
    ClViewport *zoom_viewport; /* view_a's: the one "zoom" follows */
    gulong zoom_id;

    ClCompareMode mode; /* NONE = side by side */
    double blend;       /* the mode bar's value per mode */
    double flicker_rate;
    double tolerance;
    gboolean updating_scale;

    guint stretch; /* ClStretchSource: whose values a stretch is taken over */

    GArray *masks; /* double: ignore regions, x0 y0 x1 y1 in the earlier image's pixels */

    gboolean show_heatmap;
    ClHeatmap *heatmap; /* image 2 of the shown pair, on its letterbox */
    ClLetterbox heat_letterbox;
    gboolean heat_in_frame;    /* the heat map is of the earlier image's frame */
    GPtrArray *layer_heatmaps; /* ClHeatmap*: the same image's map per encoder block */
};

/* cl-compare-view-display.c */
void cl_compare_view_display_class_init(GtkWidgetClass *widget_class);
/* The panes' captions for docs (docs[1] NULL: "No second image"). */
void cl_compare_view_set_captions(ClCompareView *self, ClDocument *const docs[2],
                                  const guint frames[2]);
/* The presets menu for doc (the earlier image): stretches, the file's windows, bands, CT. */
void cl_compare_view_update_presets(ClCompareView *self, ClDocument *doc);

G_END_DECLS
