from slugify.slug import slugify
