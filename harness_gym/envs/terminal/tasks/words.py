"""Word lists the terminal task generators draw from."""

WORDS = (
    "apple",
    "birch",
    "cobalt",
    "delta",
    "ember",
    "falcon",
    "garnet",
    "harbor",
    "iris",
    "juniper",
    "kelp",
    "lantern",
    "maple",
    "nickel",
    "onyx",
    "pepper",
    "quartz",
    "raven",
    "saffron",
    "tundra",
    "umber",
    "violet",
    "walnut",
    "xenon",
    "yarrow",
    "zephyr",
    "amber",
    "basil",
    "cedar",
    "dune",
)
NAMES = (
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "grace",
    "heidi",
    "ivan",
    "judy",
    "mallory",
    "oscar",
)
REGIONS = ("north", "south", "east", "west")


def pick(rng, items, n):
    return [items[int(i)] for i in rng.choice(len(items), size=n, replace=False)]
