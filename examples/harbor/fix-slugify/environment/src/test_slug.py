from textutil.slug import slugify

assert slugify("Hello,  World!") == "hello-world", slugify("Hello,  World!")
print("ok")
