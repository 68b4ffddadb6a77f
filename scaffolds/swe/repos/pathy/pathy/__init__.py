from pathy.ext import extension, stem
