from wordcount.count import count_words, most_common
