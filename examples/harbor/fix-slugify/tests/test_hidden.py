from textutil.slug import slugify

cases = {
    "Hello,  World!": "hello-world",
    "  Leading and trailing  ": "leading-and-trailing",
    "Already-a-slug": "already-a-slug",
    "Numbers 2 and 3.14": "numbers-2-and-3-14",
    "---": "",
    "MiXeD__case": "mixed-case",
}
for title, want in cases.items():
    got = slugify(title)
    assert got == want, (title, got, want)
print("ok")
