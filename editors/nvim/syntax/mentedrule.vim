" The buffer a rule is written in (:MentedAdd, :MentedSupersede without text).
if exists("b:current_syntax")
  finish
endif
syntax match mentedRuleComment /^#.*/
highlight default link mentedRuleComment Comment
let b:current_syntax = "mentedrule"
