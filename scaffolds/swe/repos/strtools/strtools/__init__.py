from strtools.case import camel_to_snake, snake_to_camel
