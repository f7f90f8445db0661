import base64
import io

import pytest
from PIL import Image

from pytest_sglang import images


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
@pytest.mark.parametrize("colour", sorted(images.COLOURS))
def test_solid_image_decodes_to_its_colour(colour: str, fmt: str) -> None:
    data = images.solid_image(colour, 40, 30, fmt)
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == fmt.upper()
        assert image.size == (40, 30)
        assert images.dominant_colour(image) == colour


def test_data_url_round_trips() -> None:
    data = images.solid_image("red", 8, 8, "png")
    url = images.data_url(data, "png")
    head, _, body = url.partition(",")
    assert head == "data:image/png;base64"
    assert base64.b64decode(body) == data
    assert images.data_url(data, "jpg").startswith("data:image/jpeg;base64,")


def test_digit_image_draws_ink_on_background() -> None:
    with Image.open(io.BytesIO(images.digit_image(7, 112, 112))) as image:
        colours = {rgb for _, rgb in image.convert("RGB").getcolors(112 * 112) or []}
    assert colours == {images.COLOURS["black"], images.COLOURS["white"]}
    assert images.digit_image(1) != images.digit_image(7)


def test_noise_image_is_seeded_and_blank_is_white() -> None:
    assert images.noise_image(16, 16, "png", seed=3) == images.noise_image(16, 16, "png", seed=3)
    assert images.noise_image(16, 16, "png", seed=3) != images.noise_image(16, 16, "png", seed=4)
    with Image.open(io.BytesIO(images.blank_image(10, 10, "jpeg"))) as image:
        assert images.dominant_colour(image) == "white"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: images.solid_image("teal"), "colour='teal': use one of red"),
        (lambda: images.solid_image("red", 0, 5), "width=0: give a whole number of pixels from 1 to 8192"),
        (lambda: images.solid_image("red", 5, 9000), "height=9000"),
        (lambda: images.solid_image("red", fmt="gif"), "format='gif': use one of png, jpeg"),
        (lambda: images.digit_image(10), "digit=10: give a whole number from 0 to 9"),
        (lambda: images.data_url(b"x", "webp"), "format='webp'"),
    ],
)
def test_bad_arguments_name_the_keyword_and_the_fix(call, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        call()


def test_speckled_images_differ_by_seed_and_stay_small() -> None:
    one, two = images.speckled_image("blue", 1280, 720, 1), images.speckled_image("blue", 1280, 720, 2)
    assert one != two and len(one) < 20_000
    with Image.open(io.BytesIO(one)) as image:
        assert images.dominant_colour(image) == "blue"


def test_refused_images_are_what_pillow_refuses() -> None:
    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(images.oversize_png()))
    with pytest.raises(Image.UnidentifiedImageError):
        Image.open(io.BytesIO(images.unsupported_image()))
    with Image.open(io.BytesIO(images.corrupt_png())) as image, pytest.raises(OSError):
        image.load()
    with pytest.raises(ValueError, match="within Pillow's limit"):
        images.oversize_png(100, 100)
