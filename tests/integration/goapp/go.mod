module ember.test/goapp

go 1.19
