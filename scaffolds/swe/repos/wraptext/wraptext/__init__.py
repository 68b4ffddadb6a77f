from wraptext.wrap import wrap
