" The rules buffer of mented.nvim (:MentedRules).
if exists("b:current_syntax")
  finish
endif
syntax match mentedAction /^\S.*$/
syntax match mentedTitle /\%1l.*/
syntax match mentedHelp /\%2l.*/
syntax match mentedHandle /^\s\+\zs\[[0-9a-z]\{8}\]/
syntax match mentedScope /  ([^()]*)$/
highlight default link mentedTitle Title
highlight default link mentedHelp Comment
highlight default link mentedAction Statement
highlight default link mentedHandle Identifier
highlight default link mentedScope Comment
let b:current_syntax = "mented"
