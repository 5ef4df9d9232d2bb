"""The rating methods' names, labels, notes and roles, for readers that load no ranking code (generated).

Written by ``python -m arena_pipeline.core.ranking.catalogue`` from the methods' classes
(``core.ranking.methods``); do not edit. ``core.labels`` reads it.
"""

#: The built-in methods, in board order.
METHODS: tuple[str, ...] = ('bt', 'bt_style', 'spectral')
#: Their people-facing names.
LABELS: dict[str, str] = {'bt': 'Bradley-Terry',
 'bt_style': 'Bradley-Terry, style-controlled',
 'spectral': 'Rank Centrality cross-check (spectral)'}
#: What a reader must know before reading a method's ratings.
NOTES: dict[str, str] = {'spectral': "A cross-check, not Bradley-Terry's scale: Rank Centrality is the stationary distribution of a "
             'walk on per-pair win fractions, where a pair met once weighs as much as a pair met a thousand '
             "times. It targets Bradley-Terry's strengths only when Bradley-Terry holds exactly, uses the "
             "votes less efficiently (wider intervals), and its ratings can differ from Bradley-Terry's by "
             "tens of points (up to 39 on a shown model of LMArena's boards); compare its order with "
             "Bradley-Terry's, not its ratings."}
#: The methods of each role (``RatingMethod.role``).
ROLES: dict[str, tuple[str, ...]] = {'primary': ('bt',), 'style': ('bt_style',)}
