"""The reproductions' recipes: one folder per paper, one YAML file per scale.

``speechlab/recipes/<paper>/<scale>.yaml`` holds every setting of that paper's experiments at
that scale (corpus size, model preset, training schedule, decoding). They live inside the
package so that an installed speechlab (``pip install .``, not only ``-e``) finds them;
:func:`speechlab.experiment.recipes.recipe_path` looks them up. Recipes are configs and data
preparation only, never model code.
"""
