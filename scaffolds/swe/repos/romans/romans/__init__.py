from romans.numerals import from_roman, to_roman
