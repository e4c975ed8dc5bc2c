"""Word lists the web tasks draw from (small, fixed, shipped with the package)."""

from __future__ import annotations

import numpy as np

WORDS = (
    "apple river stone cloud maple tiger orbit lemon piano candle forest silver harbor "
    "garden rocket violet copper meadow falcon window marble thunder pepper canyon "
    "anchor bridge cactus dragon ember feather glacier hammer island jungle kettle "
    "lantern mirror nectar oyster pebble quartz rabbit saddle tunnel umbrella valley "
    "walnut yonder zephyr amber blossom cobalt dune echo fjord grove hazel indigo jade "
    "kelp lilac mango nutmeg olive prism quill raven sable thistle ultra velvet willow "
    "yarrow zinnia basil cedar daisy fern ginger heron iris juniper koala lotus moss"
).split()

FIRST_NAMES = (
    "Ada Alan Grace Linus Barbara Dennis Margaret Ken Frances Edsger Radia Tim Hedy "
    "Claude Katherine John Sophie Yusuf Mei Ravi Olga Tomas Ingrid Kwame Lucia Omar"
).split()

LAST_NAMES = (
    "Lovelace Turing Hopper Torvalds Liskov Ritchie Hamilton Thompson Allen Dijkstra "
    "Perlman Berners Lamarr Shannon Johnson McCarthy Wilson Demir Chen Patel Ivanova"
).split()

CITIES = (
    "Amsterdam Berlin Cairo Denver Edinburgh Florence Geneva Havana Istanbul Jakarta "
    "Kyoto Lima Madrid Nairobi Oslo Prague Quito Rome Seoul Toronto Utrecht Vienna"
).split()

#: The tables tasks draw capitalized words from, built once (a build used to rebuild them).
CAPITALIZED = tuple(word.capitalize() for word in WORDS)
#: Cities and capitalized words, sorted, each once (UseAutocomplete's source).
PLACES_AND_WORDS = tuple(sorted(set(CITIES) | set(CAPITALIZED)))
#: Capitalized words, then first names (NavigateTree's folder and file names).
TREE_NAMES = CAPITALIZED + tuple(FIRST_NAMES)


def pick(rng: np.random.Generator, items: tuple[str, ...] | list[str], k: int) -> list[str]:
    """``k`` distinct items, in a random order."""
    index = rng.permutation(len(items))[:k]  # several times faster than choice(replace=False)
    return [items[int(i)] for i in index]


def one(rng: np.random.Generator, items: tuple[str, ...] | list[str]) -> str:
    return items[int(rng.integers(len(items)))]
