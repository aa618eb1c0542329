"""The asset catalog: the shipped file is valid, and every kind of bad entry is named with its line and field --
fatal in strict mode, recorded and skipped (the rest kept) in lenient mode."""

from __future__ import annotations

import pytest

from core.errors import DataError
from robot.contract.catalog import (
    CATALOG_FILE,
    CatalogError,
    load_catalog,
    parse_catalog,
)

GOOD = """\
assets:
  - {name: apple, kind: object, category: fruit, colour: red, size: [0.075, 0.075, 0.075], mass: 0.068}
  - {name: sugar_box, kind: object, category: box, colour: yellow, size: [0.089, 0.038, 0.175], mass: 0.514}
  - {name: grey_bowl, kind: container, category: bowl, colour: grey, size: [0.16, 0.16, 0.06], mass: 0.24,
     opening: [0.13, 0.13], floor: 0.01, holds: [fruit, sugar_box]}
"""


def test_shipped_catalog_is_valid_and_in_the_papers_proportions():
    catalog = load_catalog()
    assert catalog.issues == []
    assert sum(a.source.startswith("YCB") for a in catalog.objects) == 57  # the paper's 57 pickable YCB objects
    public = {a.name for a in catalog.assets.values() if "(public world" in a.source}  # the public benchmark's
    assert {"white_and_pink_box", "brown_box", "toy_bus", "white_ceramic_plate", "brown_ceramic_cup"} <= public
    assert {a.category for a in catalog.containers} >= {"plate", "bowl", "basket", "mug"}
    assert all(c.drawers + c.doors > 0 for c in catalog.cabinets) and catalog.cabinets
    assert all(min(a.size) > 0 and a.mass > 0 for a in catalog.assets.values())
    for container in catalog.containers:
        assert any(container.can_hold(o) and container.fits_inside(o) for o in catalog.objects), container.name


def test_container_semantics():
    catalog = parse_catalog(GOOD)
    bowl, apple, box = catalog["grey_bowl"], catalog["apple"], catalog["sugar_box"]
    assert bowl.can_hold(apple) and bowl.fits_inside(apple)
    assert bowl.can_hold(box) and bowl.fits_inside(box)  # named in `holds`; 0.089 x 0.038 fits in either way
    assert not apple.can_hold(bowl) and not apple.fits_inside(box)  # objects hold nothing
    basket = load_catalog()["wicker_basket"]
    assert not bowl.fits_inside(basket) and basket.fits_inside(load_catalog()["banana"])


def _bad(line: str) -> str:
    return GOOD + line


@pytest.mark.parametrize(("entry", "field", "words"), [
    ("  - {name: pear, kind: object, category: fruit, colour: green, size: [0.066, -0.066, 0.1], mass: 0.049}\n",
     "size", "y must be > 0"),
    ("  - {name: plate, kind: container, category: plate, colour: white, size: [0.26, 0.26, 0.025], mass: 0.3, "
     "opening: [0.2, 0.2], holds: [fruit, spaceship]}\n", "holds", "unknown container target(s) 'spaceship'"),
    ("  - {name: plum, kind: object, category: fruit, colour: purple, size: [0.05, 0.05, 0.05], mass: 0}\n",
     "mass", "must be a number of kg > 0"),
    ("  - {name: Plum, kind: object, category: fruit, colour: purple, size: [0.05, 0.05, 0.05], mass: 0.02}\n",
     "name", "snake_case"),
    ("  - {name: apple, kind: object, category: fruit, colour: red, size: [0.07, 0.07, 0.07], mass: 0.05}\n",
     "name", "duplicate of the entry at line 2"),
    ("  - {name: plum, kind: object, category: fruit, colour: purple, size: [0.05, 0.05], mass: 0.02}\n",
     "size", "must be [x, y, z]"),
    ("  - {name: plum, kind: object, category: fruit, color: purple, size: [0.05, 0.05, 0.05], mass: 0.02}\n",
     "color", "unknown field"),
    ("  - {name: tray, kind: container, category: tray, colour: black, size: [0.3, 0.2, 0.03], mass: 0.3, "
     "opening: [0.4, 0.1], holds: [fruit]}\n", "opening", "wider than the container's footprint"),
    ("  - {name: shelf, kind: cabinet, category: cabinet, colour: white, size: [0.3, 0.4, 0.5], mass: 9}\n",
     "drawers", "at least one drawer or door"),
])
def test_bad_entry_names_line_entry_and_field(entry, field, words):
    text = _bad(entry)
    line = text.count("\n")  # the appended entry is the last line
    with pytest.raises(CatalogError) as info:
        parse_catalog(text, source="assets.yaml")
    message = str(info.value)
    assert f"assets.yaml:{line}: entry " in message
    assert f": {field}: " in message and words in message

    lenient = parse_catalog(text, source="assets.yaml", strict=False)
    assert {i.line for i in lenient.issues} == {line} and field in {i.field for i in lenient.issues}
    assert {"apple", "sugar_box", "grey_bowl"} <= set(lenient.assets)  # the good entries are kept


def test_unusable_catalog_is_an_error_even_when_lenient():
    with pytest.raises(CatalogError):
        parse_catalog("assets:\n  - {name: apple, kind: object, category: fruit, colour: red, "
                      "size: [0.07, 0.07, 0.07], mass: 0.05}\n", strict=False)  # no container at all
    with pytest.raises(DataError, match="list under 'assets'"):
        parse_catalog("objects: []\n")


def test_catalog_file_is_where_the_loader_looks():
    assert CATALOG_FILE.name == "assets.yaml" and CATALOG_FILE.exists()


def test_a_file_is_parsed_once_per_version_and_each_caller_gets_its_own_catalog(tmp_path):
    """A robot runner builds its tools every episode: the catalog is parsed once per file version (a changed file is
    read again), and a caller that edits its copy does not edit another's."""
    path = tmp_path / "assets.yaml"
    path.write_text(GOOD)
    first, second = load_catalog(path), load_catalog(path)
    assert first is not second and first.assets == second.assets
    del first.assets["apple"]
    assert "apple" in load_catalog(path).assets
    path.write_text(GOOD.replace("sugar_box, kind", "cracker_box, kind").replace("sugar_box]", "cracker_box]"))
    assert "cracker_box" in load_catalog(path).assets and "sugar_box" not in load_catalog(path).assets
    path.unlink()
    with pytest.raises(DataError, match="not found"):
        load_catalog(path)


def test_invalid_yaml_reads_as_pyyamls_own_message_with_its_line():
    """The fast (libyaml) loader's errors are not shown: the document is read again by PyYAML's parser."""
    import yaml

    text = GOOD + "  - {name: [unclosed\n"
    with pytest.raises(yaml.YAMLError) as own:
        yaml.safe_load(text)
    with pytest.raises(DataError) as ours:
        parse_catalog(text)
    assert str(own.value) in str(ours.value) and "line 7" in str(ours.value)
