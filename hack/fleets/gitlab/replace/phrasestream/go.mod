module gitlab.com/ajwalker/phrasestream

go 1.24
