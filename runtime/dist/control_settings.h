/* Settings across hosts (see control_settings.c): each rank says which LLMLAB_* variables it
 * sees with a value other than rank 0's. Collective over the world, at start-up. */
#ifndef LAB_RUNTIME_DIST_CONTROL_SETTINGS_H
#define LAB_RUNTIME_DIST_CONTROL_SETTINGS_H

void lab_settings_check(void);

#endif
